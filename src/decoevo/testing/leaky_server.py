"""The toy world as an OpenAI-compatible server that echoes the caller's API key in every field it can.

Each chat reply carries the bearer token it was sent with in: the answer text (inside a JSON string of a
structured answer, after the text of a free one), a leading reasoning block, `reasoning_content`, tool
calls, `finish_reason`, a second choice, `usage` (extra fields and details), `model`, `id`,
`system_fingerprint`, and response headers. Some requests are first refused with a 500 or a 429 whose
body and headers quote the key (the client retries them). `GET /v1/models` quotes it too, and
`GET /data/NAME` serves a question file. A client that stores or prints any of this unmasked leaks the key.
"""

from __future__ import annotations

import itertools
import json
import threading
from typing import Any

from . import world
from .toy_server import unwrap_repair

REFUSE_EVERY = 9  # every 9th request is first refused (500, then 429 on the next such one)


def _plant(value: Any, token: str) -> tuple[Any, bool]:
    """`value` (a structured answer) with the token appended to its first string value."""
    if isinstance(value, str):
        return f"{value} {token}", True
    if isinstance(value, list):
        out = list(value)
        for i, item in enumerate(out):
            out[i], done = _plant(item, token)
            if done:
                return out, True
        return out, False
    if isinstance(value, dict):
        planted = dict(value)
        for k, item in planted.items():
            planted[k], done = _plant(item, token)
            if done:
                return planted, True
        return planted, False
    return value, False


def leaky_answer(body: dict[str, Any], token: str) -> str:
    messages = unwrap_repair(body["messages"])
    answer = world.respond(messages, world.schema_of(body), world.sample_index_of(body))
    if world.schema_of(body):
        answer = json.dumps(_plant(json.loads(answer), token)[0])
    else:
        answer = f"{answer} {token}"
    return f"<think>{token}</think>{answer}"


def leaky_body(body: dict[str, Any], token: str) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": leaky_answer(body, token),
        "reasoning_content": token,
        "tool_calls": [{"id": token, "type": "function", "function": {"name": token, "arguments": token}}],
        "annotations": [{"note": token}],
    }
    return {
        "id": token,
        "object": "chat.completion",
        "created": 0,
        "model": token,
        "system_fingerprint": token,
        "choices": [
            {"index": 0, "finish_reason": token, "message": message, "logprobs": {"token": token}},
            {"index": 1, "finish_reason": token, "message": {"role": "assistant", "content": token}},
        ],
        "usage": {
            "prompt_tokens": 20,
            "completion_tokens": 10,
            "total_tokens": 30,
            "note": token,
            "completion_tokens_details": {"reasoning_tokens": 2, token: token},
            "prompt_tokens_details": {"cached_tokens": 0, "note": token},
        },
    }


class LeakyServer:
    """An ASGI app (serve it with `decoevo.testing.server.serve_app`). `files` are served under /data/."""

    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self.files = files or {}
        self.tokens: set[str] = set()  # every bearer token received: a test checks the key was sent
        self.chat_requests = 0
        self.refused = 0
        self._counter = itertools.count()
        self._lock = threading.Lock()

    def app(self) -> Any:
        from starlette.applications import Starlette
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response
        from starlette.routing import Route

        def token_of(request: Request) -> str:
            auth = request.headers.get("authorization", "")
            token = auth.split(None, 1)[1] if " " in auth else auth
            with self._lock:
                self.tokens.add(token)
            return token

        def echo_headers(token: str) -> dict[str, str]:
            return {
                "X-Request-Id": token,
                "OpenAI-Organization": token,
                "Set-Cookie": f"session={token}",
                "X-Echo": f"Bearer {token}",
            }

        async def chat(request: Request) -> Response:
            body = await request.json()
            token = token_of(request)
            with self._lock:
                n = next(self._counter)
                self.chat_requests += 1
                refuse = n % REFUSE_EVERY == REFUSE_EVERY - 1
                self.refused += refuse
            if refuse:
                status = 500 if (n // REFUSE_EVERY) % 2 == 0 else 429
                return JSONResponse(
                    {"error": {"message": f"overloaded; your key {token} is fine", "code": token}, "detail": token},
                    status_code=status,
                    headers={**echo_headers(token), "Retry-After": "0"},
                )
            return JSONResponse(leaky_body(body, token), headers=echo_headers(token))

        async def models(request: Request) -> Response:
            token = token_of(request)
            return JSONResponse(
                {
                    "object": "list",
                    "data": [{"id": "toy", "object": "model", "owned_by": token, "root": token, "created": 0}],
                },
                headers=echo_headers(token),
            )

        async def data(request: Request) -> Response:
            name = request.path_params["name"]
            if name not in self.files:
                return JSONResponse({"error": f"no such file: {request.url}"}, status_code=404)
            return Response(self.files[name], media_type="application/octet-stream")

        return Starlette(
            routes=[
                Route("/v1/chat/completions", chat, methods=["POST"]),
                Route("/v1/models", models, methods=["GET"]),
                Route("/data/{name:path}", data, methods=["GET"]),
            ]
        )
