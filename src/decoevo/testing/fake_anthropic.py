"""A scriptable server speaking Anthropic's Messages API (`POST /v1/messages`), for testing the LiteLLM
backend against a wire format other than OpenAI's. `responder(request_json, n)` returns an
`AnthropicReply`: text, an optional thinking block, the stop reason, or an error status."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class AnthropicReply:
    text: str = "ok"
    thinking: str | None = None
    stop_reason: str = "end_turn"  # or "max_tokens"
    status: int = 200
    error_type: str = "api_error"
    error_message: str = "scripted error"
    headers: dict[str, str] = field(default_factory=dict)


class FakeAnthropic:
    def __init__(self, responder: Callable[[dict[str, Any], int], AnthropicReply]) -> None:
        self.responder = responder
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        async def messages(request: Request) -> Response:
            body = await request.json()
            with self._lock:
                n = next(self._counter)
                self.requests.append(body)
                self.headers.append(dict(request.headers))
            reply = self.responder(body, n)
            if reply.status != 200:
                return JSONResponse({"type": "error", "error": {"type": reply.error_type,
                                                                "message": reply.error_message}},
                                    status_code=reply.status, headers=reply.headers)
            content: list[dict[str, Any]] = []
            if reply.thinking is not None:
                content.append({"type": "thinking", "thinking": reply.thinking, "signature": "sig"})
            content.append({"type": "text", "text": reply.text})
            return JSONResponse({
                "id": f"msg_{n}", "type": "message", "role": "assistant", "model": body.get("model", ""),
                "content": content, "stop_reason": reply.stop_reason, "stop_sequence": None,
                "usage": {"input_tokens": 12, "output_tokens": max(1, len(reply.text) // 4)},
            }, headers=reply.headers)

        return Starlette(routes=[Route("/v1/messages", messages, methods=["POST"])])
