"""The simulated model in process, and an event loop whose clock only moves when everything waits.

`SimBackend` answers exactly as `SimServer` would over HTTP (the same body, so the same reply), then
sleeps the reply's latency. Run under `run_virtual`, those sleeps cost no real time and the loop's
clock jumps to the next timer whenever nothing is ready: the client's own CPU takes zero virtual time.
The virtual wall time of a run is then its critical path under the latency model and the client's
concurrency limit, and with `LatencyModel.fixed(1.0)` it counts dependency waves: the longest chain of
calls that each had to wait for an earlier one.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..lm.endpoint import server_schema
from ..lm.types import BackendRequest, Completion
from .sim_model import LatencyModel, SimModel, SimWorld

T = TypeVar("T")


def openai_body(request: BackendRequest, model: str = "sim") -> dict[str, Any]:
    """The chat-completions body the OpenAI backend sends for `request` (json_schema style), schema
    included as the backend sends it (no length caps), so a request gets the same reply in process as
    from `SimServer` (tests/test_sim_server.py compares the two)."""
    body: dict[str, Any] = {"model": model, "messages": [m.as_dict() for m in request.messages],
                            "temperature": request.params.temperature, "max_tokens": request.params.max_tokens,
                            "seed": request.params.effective_seed()}
    if request.json_schema is not None:
        body["response_format"] = {"type": "json_schema", "json_schema": {
            "name": "output", "schema": server_schema(request.json_schema), "strict": False}}
    return body


class SimBackend:
    """A `decoevo.lm` backend: the simulated model, `max_concurrency` requests at once."""

    def __init__(self, seed: int = 0, latency: LatencyModel | None = None, max_concurrency: int = 64,
                 identity: str = "sim", world: SimWorld | None = None) -> None:
        self.model = SimModel(seed, latency, world)
        self.max_concurrency = max_concurrency
        self.identity = identity
        self.requests = 0
        self.in_flight = 0
        self.max_in_flight = 0
        self.starts: list[float] = []  # loop time at which each request started

    async def complete(self, request: BackendRequest) -> Completion:
        reply = self.model.reply(openai_body(request))
        self.requests += 1
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.starts.append(asyncio.get_running_loop().time())
        try:
            await asyncio.sleep(reply.latency_s)
        finally:
            self.in_flight -= 1
        return Completion(text=reply.content, prompt_tokens=reply.prompt_tokens,
                          completion_tokens=reply.completion_tokens, finish_reason=reply.finish_reason)

    async def aclose(self) -> None:
        return None


class _JumpingSelector(selectors.DefaultSelector):
    """Polls for I/O without waiting; a wait for a timer instead moves the owning loop's clock."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or timeout is None or timeout <= 0:
            return ready if ready or timeout is not None else super().select(None)  # real I/O only: block
        self.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    def __init__(self) -> None:
        self._jumping = _JumpingSelector()
        super().__init__(self._jumping)

    def time(self) -> float:
        return self._jumping.now


def run_virtual(coro: Coroutine[Any, Any, T]) -> tuple[T, float]:
    """Run `coro` on a virtual-time loop; returns its result and the virtual seconds it took."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        loop = runner.get_loop()
        start = loop.time()
        result = runner.run(coro)
        return result, loop.time() - start
