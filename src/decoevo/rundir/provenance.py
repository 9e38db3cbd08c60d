"""`provenance.json`: what produced a run, written once when a new run starts (decoevo.provenance
gathers it). Every field a reader needs has a default, so runs made before the file existed, or by a
newer version with more fields, still read."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)


class FileDigest(_Record):
    """A file the run read (questions, task_spec): its sha256 when it could be read, else why not."""

    role: str  # "data" or "task_spec"
    path: str
    size: int | None = None
    sha256: str | None = None
    error: str | None = None


class ModelIdentity(_Record):
    """One configured model and what the backend says it is. `served` is the server's `/models` entry
    for the model (an OpenAI-compatible server), `gguf_sha256` the weights' digest (the embedded
    backend); either stays None with `error` saying why when it could not be found out."""

    name: str  # the key in lm.models
    roles: list[str] = Field(default_factory=list)  # roles mapped to it explicitly (others use 'default')
    backend: str
    model: str
    base_url: str | None = None
    served: dict[str, Any] | None = None
    served_ids: list[str] = Field(default_factory=list)  # what the server lists (the first few)
    gguf_path: str | None = None
    gguf_size: int | None = None
    gguf_sha256: str | None = None
    error: str | None = None


class GitInfo(_Record):
    """The checkout decoevo was imported from (absent for an installed package)."""

    commit: str
    dirty: bool | None = None


class Provenance(_Record):
    decoevo: str
    python: str
    platform: str
    packages: dict[str, str | None] = Field(default_factory=dict)  # None: not installed
    files: list[FileDigest] = Field(default_factory=list)
    models: list[ModelIdentity] = Field(default_factory=list)
    git: GitInfo | None = None
    created: float | None = None
