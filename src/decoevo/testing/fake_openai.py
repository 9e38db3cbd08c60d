"""A scriptable OpenAI-compatible chat server.

Each request to /v1/chat/completions is answered by `responder(request_json, n)` where n counts
requests from 0; it returns a `Reply`: a status, headers, a delay, and either the assistant's
content or a raw body. Used to test retries, Retry-After and concurrency, and to benchmark the
orchestrator's overhead against a server with a known, fixed latency.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Reply:
    content: str = "ok"
    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None  # sent verbatim instead of a chat completion (for broken bodies)


def chat_body(content: str, model: str, prompt_tokens: int = 10, completion_tokens: int | None = None) -> str:
    completion_tokens = completion_tokens if completion_tokens is not None else max(1, len(content) // 4)
    return json.dumps({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                  "total_tokens": prompt_tokens + completion_tokens},
    })


class FakeOpenAI:
    def __init__(self, responder: Callable[[dict[str, Any], int], Reply], models: tuple[str, ...] = ("fake",)) -> None:
        self.responder = responder
        self.models = models  # the ids GET /v1/models lists
        self.requests: list[dict[str, Any]] = []
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self.max_in_flight = 0
        self._in_flight = 0

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        async def chat(request: Request) -> Response:
            body = await request.json()
            with self._lock:
                n = next(self._counter)
                self.requests.append(body)
                self._in_flight += 1
                self.max_in_flight = max(self.max_in_flight, self._in_flight)
            try:
                reply = self.responder(body, n)
                if reply.delay_s:
                    await asyncio.sleep(reply.delay_s)
                if reply.status != 200:
                    return JSONResponse({"error": {"message": f"scripted {reply.status}", "type": "fake"}},
                                        status_code=reply.status, headers=reply.headers)
                text = reply.raw_body if reply.raw_body is not None else chat_body(reply.content, body.get("model", ""))
                return Response(text, media_type="application/json", headers=reply.headers)
            finally:
                with self._lock:
                    self._in_flight -= 1

        async def models(_: Request) -> Response:
            return JSONResponse({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "decoevo-tests"}
                                                             for m in self.models]})

        return Starlette(routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ])
