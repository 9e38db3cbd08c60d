"""The event loop a `decoevo run` or `resume` runs on: uvloop when it is installed (the optional extra
`decoevo[fast]`), else asyncio's own. A run at concurrency 256 spends a visible share of its CPU in the loop and
its transports (docs/performance.md, issue 47.1); uvloop does that work in C. `DECOEVO_EVENT_LOOP=asyncio`
keeps asyncio's loop even with uvloop installed."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's loop maker, or None (asyncio's default) when it is not installed or not wanted."""
    if os.environ.get("DECOEVO_EVENT_LOOP", "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop.new_event_loop


def run(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run(main)` on the loop `loop_factory` picks."""
    with asyncio.Runner(loop_factory=loop_factory()) as runner:
        return runner.run(main)
