"""The fixed-delay OpenAI-compatible server of bench/lm_overhead.py, in a thread or its own process."""

from __future__ import annotations

import json
import multiprocessing as mp
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app


class FixedDelay:
    """Picklable responder: `{"answer": ..., "score": ...}` after a fixed delay (text runs get it as text)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        return Reply(content=json.dumps({"answer": f"reply {n}", "score": n % 10}), delay_s=self.delay_s)


def _serve_forever(delay_s: float, urls: Any, stop: Any) -> None:
    with serve_app(FakeOpenAI(FixedDelay(delay_s)).app()) as url:
        urls.put(url)
        stop.wait()


@contextmanager
def fake_server(delay_s: float, mode: str) -> Iterator[tuple[str, int | None]]:
    """Yield the base URL of a fixed-delay server, in a thread of this process or in a child process,
    and the child's pid (None for a thread)."""
    if mode == "thread":
        with serve_app(FakeOpenAI(FixedDelay(delay_s)).app()) as url:
            yield url, None
        return
    ctx = mp.get_context("spawn")
    urls, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve_forever, args=(delay_s, urls, stop), daemon=True)
    proc.start()
    try:
        yield str(urls.get(timeout=60)), proc.pid
    finally:
        stop.set()
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()
