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
    content: str | None = "ok"  # None sends `"content": null` (a reasoning model out of tokens)
    status: int = 200
    delay_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)
    raw_body: str | None = None  # sent verbatim instead of a chat completion (for broken bodies)
    finish_reason: str = "stop"
    reasoning_content: str | None = None  # the `reasoning_content` field some servers (vLLM, DeepSeek) add
    usage: dict[str, Any] | None = None  # replaces the usage object (e.g. with completion_tokens_details)
    error_message: str | None = None  # the error body's message for a non-200 status


def chat_body(content: str | None, model: str, prompt_tokens: int = 10, completion_tokens: int | None = None,
              *, finish_reason: str = "stop", reasoning_content: str | None = None,
              usage: dict[str, Any] | None = None) -> str:
    if completion_tokens is None:
        completion_tokens = max(1, len(content or "") // 4 + len(reasoning_content or "") // 4)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    return json.dumps({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "finish_reason": finish_reason, "message": message}],
        "usage": usage or {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                           "total_tokens": prompt_tokens + completion_tokens},
    })


class FakeOpenAI:
    def __init__(self, responder: Callable[[dict[str, Any], int], Reply], models: tuple[str, ...] = ()) -> None:
        self.responder = responder
        # the ids GET /v1/models lists; none by default: a scripted server answers whatever model is asked,
        # and a run checks the name only against a list that names something
        self.models = models
        self.requests: list[dict[str, Any]] = []
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self.max_in_flight = 0
        self._in_flight = 0

    async def answer(self, body: dict[str, Any]) -> tuple[int, str, dict[str, str]]:
        """One chat completion request: (status, JSON body, headers). Shared by both web servers."""
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
                message = reply.error_message or f"scripted {reply.status}"
                return reply.status, json.dumps({"error": {"message": message, "type": "fake"}}), reply.headers
            text = reply.raw_body if reply.raw_body is not None else chat_body(
                reply.content, body.get("model", ""), finish_reason=reply.finish_reason,
                reasoning_content=reply.reasoning_content, usage=reply.usage)
            return 200, text, reply.headers
        finally:
            with self._lock:
                self._in_flight -= 1

    def models_body(self) -> str:
        return json.dumps({"object": "list", "data": [{"id": m, "object": "model", "owned_by": "decoevo-tests"}
                                                       for m in self.models]})

    def app(self) -> Any:
        """The server as an ASGI app (starlette; `testing.server.serve_app` runs it with uvicorn)."""
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import Response
        from starlette.routing import Route

        async def chat(request: Request) -> Response:
            status, text, headers = await self.answer(await request.json())
            return Response(text, status_code=status, media_type="application/json", headers=headers)

        async def models(_: Request) -> Response:
            return Response(self.models_body(), media_type="application/json")

        return Starlette(routes=[
            Route("/v1/chat/completions", chat, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
        ])

    def web_app(self) -> Any:
        """The same server as an aiohttp application: aiohttp is a dependency of the plain wheel, starlette
        and uvicorn are not (`python -m decoevo.testing.toy_server` runs this one)."""
        from aiohttp import web

        async def chat(request: web.Request) -> web.Response:
            try:
                body = await request.json()
            except ValueError:
                return web.json_response({"error": {"message": "the body is not JSON", "type": "fake"}}, status=400)
            status, text, headers = await self.answer(body)
            return web.Response(text=text, status=status, content_type="application/json", headers=headers)

        async def models(_: web.Request) -> web.Response:
            return web.Response(text=self.models_body(), content_type="application/json")

        app = web.Application()
        app.router.add_post("/v1/chat/completions", chat)
        app.router.add_get("/v1/models", models)
        return app
