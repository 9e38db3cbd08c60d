"""The fixed-delay OpenAI-compatible server of bench/client/lm_overhead.py, in a thread or its own process.

Two implementations:
- `fast` (default): a plain ASGI app on uvicorn with httptools and uvloop (the `bench` extra; without
  them uvicorn's h11 and asyncio). It parses each request's JSON, waits, and sends a chat completion,
  at about a third of the CPU of `starlette`.
- `starlette`: `decoevo.testing.fake_openai.FakeOpenAI` (Starlette routing, request log) on uvicorn's
  pure-Python h11 and asyncio. This is the server the first measurements used.

The benchmark measures the client. On this 2-core machine, server CPU competes with the client's,
and it also adds to every request's latency.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import multiprocessing as mp
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from decoevo.testing.fake_openai import FakeOpenAI, Reply, chat_body
from decoevo.testing.server import read_body, serve_app


def _answer(n: int) -> str:
    return json.dumps({"answer": f"reply {n}", "score": n % 10})


class FixedDelay:
    """Picklable responder for `FakeOpenAI`: `{"answer": ..., "score": ...}` after a fixed delay."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        return Reply(content=_answer(n), delay_s=self.delay_s)


class FixedDelayApp:
    """Plain ASGI: every POST gets a chat completion with `_answer(n)` after `delay_s`."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.count = 0

    async def __call__(self, scope: dict[str, Any], receive: Callable[[], Awaitable[dict[str, Any]]],
                       send: Callable[[dict[str, Any]], Awaitable[None]]) -> None:
        if scope["type"] != "http":
            return
        request = json.loads(await read_body(receive))  # a real server reads the request; so does this one
        n, self.count = self.count, self.count + 1
        await asyncio.sleep(self.delay_s)
        body = chat_body(_answer(n), request.get("model", ""), completion_tokens=8).encode()
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
        await send({"type": "http.response.body", "body": body})


def server_stack(impl: str) -> dict[str, str]:
    """What serves the requests: the app and uvicorn's HTTP parser and event loop."""
    if impl == "starlette":
        return {"app": "FakeOpenAI (Starlette)", "http": "h11", "loop": "asyncio"}
    fast = importlib.util.find_spec("httptools") is not None and importlib.util.find_spec("uvloop") is not None
    return {"app": "FixedDelayApp (plain ASGI)", "http": "httptools" if fast else "h11",
            "loop": "uvloop" if fast else "asyncio"}


@contextmanager
def _serve(delay_s: float, impl: str) -> Iterator[str]:
    stack = server_stack(impl)
    app = FakeOpenAI(FixedDelay(delay_s)).app() if impl == "starlette" else FixedDelayApp(delay_s)
    with serve_app(app, http=stack["http"], loop=stack["loop"]) as url:
        yield url


def _serve_forever(delay_s: float, impl: str, urls: Any, stop: Any) -> None:
    with _serve(delay_s, impl) as url:
        urls.put(url)
        stop.wait()


@contextmanager
def fake_server(delay_s: float, mode: str, impl: str = "fast") -> Iterator[tuple[str, int | None]]:
    """Yield the base URL of a fixed-delay server, in a thread of this process or in a child process,
    and the child's pid (None for a thread)."""
    if mode == "thread":
        with _serve(delay_s, impl) as url:
            yield url, None
        return
    ctx = mp.get_context("spawn")
    urls, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve_forever, args=(delay_s, impl, urls, stop), daemon=True)
    proc.start()
    try:
        yield str(urls.get(timeout=60)), proc.pid
    finally:
        stop.set()
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()
