"""A scripted in-process backend for unit tests of logic: a function decides each completion."""

from __future__ import annotations

from collections.abc import Callable

from ..lm.types import BackendRequest, Completion
from . import world


class ScriptedBackend:
    """`script(request) -> str | Completion | Exception`; every call is recorded in `calls`."""

    max_concurrency = 4

    def __init__(
        self, script: Callable[[BackendRequest], str | Completion | Exception], identity: str = "scripted"
    ) -> None:
        self.script = script
        self.identity = identity
        self.calls: list[BackendRequest] = []

    async def complete(self, request: BackendRequest) -> Completion:
        self.calls.append(request)
        out = self.script(request)
        if isinstance(out, Exception):
            raise out
        if isinstance(out, Completion):
            return out
        return Completion(text=out, prompt_tokens=sum(len(m.content) // 4 for m in request.messages),
                          completion_tokens=max(1, len(out) // 4))

    async def aclose(self) -> None:
        return None


def toy_world_backend(identity: str = "toy-world") -> ScriptedBackend:
    """A backend that plays every role in `decoevo.testing.world`."""
    return ScriptedBackend(
        lambda r: world.respond([m.as_dict() for m in r.messages], r.json_schema, r.params.sample_index),
        identity=identity,
    )
