"""A fault-injecting HTTP proxy in front of an OpenAI-compatible server on 127.0.0.1.

Every request is forwarded to the upstream unless the proxy injects a fault instead:

  rate_limit    429 with a Retry-After header (the upstream never sees the request)
  server_error  500 (the upstream never sees the request)
  timeout       the request is held until the client gives up (or `hold_s` passes), then dropped
  truncate      the upstream's response body cut in half
  broken_json   the assistant content replaced by syntactically broken JSON
  wrong_schema  the assistant content replaced by valid JSON with fields no schema asks for

The two output faults only hit structured requests (those with a `response_format`): replacing a free-text
answer would change the answer, not break it. Whether and which fault hits a request is drawn from an RNG
seeded by (seed, sha256 of the body, how many times that body was seen before), so the faults a run meets
are reproducible even when requests arrive concurrently in a different order; `injected` counts them by kind.

    proxy = FaultProxy("http://127.0.0.1:8000", FaultRates(rate_limit=0.1, timeout=0.05), seed=3)
    with serve_app(proxy.app()) as url:   # point the client at f"{url}/v1"
        ...
    print(proxy.injected)
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import threading
import time
from collections import Counter
from dataclasses import astuple, dataclass, fields
from typing import Any

#: header names not copied between the two legs (hop-by-hop, or recomputed by the sending side)
_SKIP_HEADERS = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive",
                           "content-encoding", "accept-encoding"})
BROKEN_SUFFIX = ', "unterminated": ['


@dataclass(frozen=True)
class FaultRates:
    """Probability of each fault per request; at most one fault per request, so they must sum to <= 1."""

    rate_limit: float = 0.0
    server_error: float = 0.0
    timeout: float = 0.0
    truncate: float = 0.0
    broken_json: float = 0.0
    wrong_schema: float = 0.0

    def __post_init__(self) -> None:
        if any(r < 0 for r in astuple(self)) or sum(astuple(self)) > 1:
            raise ValueError(f"fault rates must be >= 0 and sum to at most 1: {self}")

    @staticmethod
    def kinds() -> tuple[str, ...]:
        return tuple(f.name for f in fields(FaultRates))

    @property
    def transport(self) -> float:
        """The rate of faults the client sees as a failed HTTP exchange (it retries them)."""
        return self.rate_limit + self.server_error + self.timeout + self.truncate

    @property
    def output(self) -> float:
        """The rate of faults the client sees as an invalid model output (it asks for a repair)."""
        return self.broken_json + self.wrong_schema


TRANSPORT_FAULTS = ("rate_limit", "server_error", "timeout", "truncate")
OUTPUT_FAULTS = ("broken_json", "wrong_schema")


def break_content(kind: str, content: str) -> str:
    """The replacement assistant content for an output fault."""
    if kind == "broken_json":  # cut mid-way and left open: no JSON parser accepts it
        return content[: len(content) // 2] + BROKEN_SUFFIX
    return json.dumps({"note": "fault proxy: these fields are not the ones asked for", "value": 42})


class FaultProxy:
    def __init__(self, upstream: str, rates: FaultRates, seed: int = 0, *, hold_s: float = 10.0,
                 retry_after: str = "1") -> None:
        if not upstream.startswith(("http://127.0.0.1", "http://localhost")):
            raise ValueError(f"the fault proxy only fronts local servers, not {upstream}")
        self.upstream = upstream.rstrip("/")
        self.rates = rates
        self.seed = seed
        self.hold_s = hold_s
        self.retry_after = retry_after
        self.injected: Counter[str] = Counter({k: 0 for k in FaultRates.kinds()})
        self.requests = 0  # requests received
        self.forwarded = 0  # requests that reached the upstream
        self.structured = 0  # requests with a response_format
        self._seen: Counter[str] = Counter()
        self._lock = threading.Lock()

    def choose(self, body: bytes, structured: bool) -> str | None:
        """The fault (or None) for this request: reproducible per (seed, body, occurrence)."""
        digest = hashlib.sha256(body).hexdigest()
        with self._lock:
            occurrence = self._seen[digest]
            self._seen[digest] += 1
        draw = random.Random(f"{self.seed}:{digest}:{occurrence}").random()
        edge = 0.0
        for kind, rate in zip(FaultRates.kinds(), astuple(self.rates), strict=True):
            edge += rate
            if draw < edge:
                return None if kind in OUTPUT_FAULTS and not structured else kind
        return None

    def summary(self) -> dict[str, Any]:
        return {"requests": self.requests, "forwarded": self.forwarded, "structured": self.structured,
                "injected": dict(self.injected)}

    def app(self) -> Any:
        import httpx
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        async def hold_then_drop(request: Request) -> Response:
            deadline = time.monotonic() + self.hold_s
            while time.monotonic() < deadline and not await request.is_disconnected():
                await asyncio.sleep(0.02)
            # The client has normally gone; if it is still waiting, a gateway timeout is the honest answer.
            return JSONResponse({"error": {"message": "fault proxy: held too long", "type": "timeout"}}, 504)

        async def proxy(request: Request) -> Response:
            body = await request.body()
            try:
                structured = bool(json.loads(body or b"{}").get("response_format"))
            except (ValueError, AttributeError):
                structured = False
            # Only model calls are faulted and counted; a run's other requests (GET /models for its
            # provenance) pass through as they are.
            chat = request.method == "POST" and request.url.path.endswith("/chat/completions")
            fault = self.choose(body, structured) if chat else None
            with self._lock:
                self.requests += chat
                self.structured += structured
                if fault is not None:
                    self.injected[fault] += 1
            if fault == "rate_limit":
                return JSONResponse({"error": {"message": "fault proxy: rate limited", "type": "rate_limit"}},
                                    429, headers={"Retry-After": self.retry_after})
            if fault == "server_error":
                return JSONResponse({"error": {"message": "fault proxy: server error", "type": "server"}}, 500)
            if fault == "timeout":
                return await hold_then_drop(request)
            headers = {k: v for k, v in request.headers.items() if k.lower() not in _SKIP_HEADERS}
            async with httpx.AsyncClient(timeout=None) as client:
                upstream = await client.request(request.method, f"{self.upstream}{request.url.path}",
                                                params=request.query_params, headers=headers, content=body)
            with self._lock:
                self.forwarded += chat
            content = upstream.content
            if fault == "truncate":
                content = content[: len(content) // 2]
            elif fault in OUTPUT_FAULTS and upstream.status_code == 200:
                try:
                    reply = json.loads(content)
                    message = reply["choices"][0]["message"]
                    message["content"] = break_content(fault, message.get("content") or "")
                    content = json.dumps(reply).encode()
                except (ValueError, LookupError, TypeError, AttributeError):  # not a chat completion: as is
                    with self._lock:
                        self.injected[fault] -= 1
            out_headers = {k: v for k, v in upstream.headers.items() if k.lower() not in _SKIP_HEADERS}
            return Response(content, upstream.status_code, headers=out_headers)

        return Starlette(routes=[Route("/{path:path}", proxy, methods=["GET", "POST"])])
