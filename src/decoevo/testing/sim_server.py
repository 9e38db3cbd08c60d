"""The simulated model (`sim_model.SimModel`) behind an OpenAI-compatible HTTP API, with a server's limits.

A request waits for one of `slots` slots (queueing, as a batching server does past its batch size),
then holds it for the model's latency. Optionally a token bucket of `rate_rps` requests per second
(burst `burst`) or a queue longer than `max_queue` answers 429 with Retry-After instead. The server
counts what a benchmark needs from its side: requests, 429s, the most requests in service and waiting,
and slot-seconds busy (`SimStats`; also at GET /sim/stats, and POST /sim/reset starts afresh).

    server = SimServer(SimServerConfig(slots=64, seed=0))
    with serve_app(server.app()) as url:   # point the client at f"{url}/v1"
        ...
    print(server.stats.snapshot())
"""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .fake_openai import chat_body
from .server import read_body
from .sim_model import LatencyModel, SimModel, SimWorld

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class SimServerConfig:
    seed: int = 0
    slots: int = 64
    latency: LatencyModel = field(default_factory=LatencyModel)
    rate_rps: float | None = None  # 429 above this request rate (token bucket), None for no limit
    burst: int = 64
    max_queue: int | None = None  # 429 when more requests than this already wait for a slot
    retry_after_s: float = 1.0
    world: SimWorld | None = None  # the simulated world's parameters (SimModel's defaults when None)


@dataclass
class SimStats:
    requests: int = 0
    served: int = 0
    rejected_429: int = 0
    in_flight: int = 0
    waiting: int = 0
    max_in_flight: int = 0
    max_waiting: int = 0
    busy_slot_s: float = 0.0  # sum over requests of the time each held a slot
    active_s: float = 0.0  # time at least one request held a slot
    completion_tokens: int = 0
    prompt_tokens: int = 0
    by_role: Counter[str] = field(default_factory=Counter)
    _active_since: float | None = None

    def start(self, now: float) -> None:
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        if self.in_flight == 1:
            self._active_since = now

    def finish(self, now: float, held_s: float) -> None:
        self.in_flight -= 1
        self.served += 1
        self.busy_slot_s += held_s
        if self.in_flight == 0 and self._active_since is not None:
            self.active_s += now - self._active_since
            self._active_since = None

    def snapshot(self) -> dict[str, Any]:
        out = {k: v for k, v in asdict(self).items() if not k.startswith("_")}
        out["by_role"] = dict(sorted(self.by_role.items()))
        out["mean_in_flight_while_active"] = round(self.busy_slot_s / self.active_s, 2) if self.active_s else 0.0
        return out


class SimServer:
    """A plain ASGI app (no framework: its own CPU stays small next to the client's)."""

    def __init__(self, config: SimServerConfig | None = None) -> None:
        self.config = config or SimServerConfig()
        self.model = SimModel(self.config.seed, self.config.latency, self.config.world)
        self.stats = SimStats()
        self._slots: asyncio.Semaphore | None = None
        self._tokens = float(self.config.burst)
        self._refilled = time.monotonic()

    def reset(self) -> None:
        self.stats = SimStats()

    def _admit(self, now: float) -> bool:
        c = self.config
        if c.max_queue is not None and self.stats.waiting >= c.max_queue:
            return False
        if c.rate_rps is None:
            return True
        self._tokens = min(float(c.burst), self._tokens + (now - self._refilled) * c.rate_rps)
        self._refilled = now
        if self._tokens < 1.0:
            return False
        self._tokens -= 1.0
        return True

    async def chat(self, body: dict[str, Any]) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        if self._slots is None:  # made on the serving loop
            self._slots = asyncio.Semaphore(self.config.slots)
        stats = self.stats
        stats.requests += 1
        if not self._admit(time.monotonic()):
            stats.rejected_429 += 1
            error = json.dumps({"error": {"message": "simulated server: rate limited", "type": "rate_limit"}})
            return 429, error.encode(), [(b"retry-after", str(self.config.retry_after_s).encode())]
        reply = self.model.reply(body)
        stats.waiting += 1
        stats.max_waiting = max(stats.max_waiting, stats.waiting)
        async with self._slots:
            stats.waiting -= 1
            started = time.monotonic()
            stats.start(started)
            try:
                await asyncio.sleep(reply.latency_s)
            finally:
                done = time.monotonic()
                stats.finish(done, done - started)
        stats.by_role[reply.role] += 1
        stats.prompt_tokens += reply.prompt_tokens
        stats.completion_tokens += reply.completion_tokens
        text = chat_body(reply.content, str(body.get("model", "")), reply.prompt_tokens, reply.completion_tokens,
                         finish_reason=reply.finish_reason)
        return 200, text.encode(), []

    def app(self) -> Callable[[dict[str, Any], Receive, Send], Awaitable[None]]:
        async def asgi(scope: dict[str, Any], receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                return
            raw = await read_body(receive)
            path, method = scope["path"], scope["method"]
            headers: list[tuple[bytes, bytes]] = []
            if method == "POST" and path.endswith("/chat/completions"):
                status, payload, headers = await self.chat(json.loads(raw))
            elif path.endswith("/sim/stats"):
                status, payload = 200, json.dumps(self.stats.snapshot()).encode()
            elif method == "POST" and path.endswith("/sim/reset"):
                self.reset()
                status, payload = 200, b"{}"
            elif path.endswith("/models"):
                models = {"object": "list", "data": [{"id": "sim", "object": "model"}]}
                status, payload = 200, json.dumps(models).encode()
            else:
                status, payload = 404, b'{"error": {"message": "not found"}}'
            await send({"type": "http.response.start", "status": status,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"content-length", b"%d" % len(payload)), *headers]})
            await send({"type": "http.response.body", "body": payload})

        return asgi
