"""The toy world behind a server with one slot, queued as llama-cpp-python's server queues it.

`python -m llama_cpp.server` generates one reply at a time; the other requests wait in order. A request
whose client gave up (a timeout) is still generated in full: the server does not notice, so a client that
abandons a queue of requests leaves the server busy with them long after. Schema-constrained decoding can
be much slower there than plain decoding (a grammar checked against every token of the vocabulary).

`OneSlotServer` scripts those three things for tests: `service_s` per plain reply, `structured_s` per reply
with a `response_format`, and `stalls` (request numbers, from 0, whose reply takes `stall_s` once, as a
long generation does). `expose` chooses what the server tells about itself: llama.cpp's `GET /props`
(`total_slots`), its `GET /slots` (one entry per slot), or nothing (llama-cpp-python's server).

    server = OneSlotServer(service_s=0.2, expose="props")
    with serve_app(server.app()) as url:   # the model `toy` at f"{url}/v1"
        ...
    server.most_received   # the most requests it held at once, waiting or generating
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable
from typing import Any, Literal

from .fake_openai import FakeOpenAI, Reply
from .toy_server import toy_reply

Expose = Literal["props", "slots", "none"]


class OneSlotServer(FakeOpenAI):
    def __init__(self, *, service_s: float = 0.05, structured_s: float | None = None, stalls: Iterable[int] = (),
                 stall_s: float = 0.0, expose: Expose = "props") -> None:
        super().__init__(self._reply, models=("toy",))
        self.service_s = service_s
        self.structured_s = service_s if structured_s is None else structured_s
        self.stalls = frozenset(stalls)
        self.stall_s = stall_s
        self.expose = expose
        self.most_received = 0  # requests held at once, waiting for the slot or in it
        self.generated = 0  # replies generated, whether or not their client still waited
        self._received = 0
        self._slot: asyncio.Lock | None = None  # made on the serving loop
        self._count = threading.Lock()

    def _reply(self, body: dict[str, Any], n: int) -> Reply:
        seconds = self.structured_s if body.get("response_format") else self.service_s
        return toy_reply(body, n, self.stall_s if n in self.stalls else seconds)

    async def answer(self, body: dict[str, Any]) -> tuple[int, str, dict[str, str]]:
        # Generation runs on as its own task: a client that goes away does not stop it.
        return await asyncio.shield(asyncio.ensure_future(self._queued(body)))

    async def _queued(self, body: dict[str, Any]) -> tuple[int, str, dict[str, str]]:
        if self._slot is None:
            self._slot = asyncio.Lock()  # asyncio's lock wakes its waiters in order
        with self._count:
            self._received += 1
            self.most_received = max(self.most_received, self._received)
        try:
            async with self._slot:
                answer = await super().answer(body)
                self.generated += 1
                return answer
        finally:
            with self._count:
                self._received -= 1

    def props_body(self) -> str:
        """llama.cpp server's `/props`, as far as decoevo reads it."""
        return json.dumps({"total_slots": 1, "default_generation_settings": {"n_ctx": 4096}})

    def slots_body(self) -> str:
        return json.dumps([{"id": 0, "n_ctx": 4096, "is_processing": False}])

    def app(self) -> Any:
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        app = super().app()

        async def props(_: Request) -> Response:
            return Response(self.props_body(), media_type="application/json")

        async def slots(_: Request) -> Response:
            return Response(self.slots_body(), media_type="application/json")

        if self.expose == "props":
            app.router.routes.append(Route("/props", props, methods=["GET"]))
        elif self.expose == "slots":
            app.router.routes.append(Route("/slots", slots, methods=["GET"]))
        return app
