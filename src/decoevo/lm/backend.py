"""The backend protocol: one resolved request in, one completion out, typed errors on failure."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .types import BackendRequest, Completion


@runtime_checkable
class Backend(Protocol):
    #: what makes completions reproducible: model + weights/server; the cache namespace
    identity: str
    #: how many requests may be in flight at once
    max_concurrency: int

    async def complete(self, request: BackendRequest) -> Completion:
        """Raise RetryableError for transient faults, InfrastructureError for permanent ones,
        RefusalError when the server reports a refusal."""
        ...

    async def aclose(self) -> None: ...
