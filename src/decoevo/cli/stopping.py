"""A run stopped from outside: SIGTERM (a scheduler, `kill`, a container stopping) ends it as Ctrl-C does, so
its requests are settled and it says where it stopped and how to continue, instead of dying without a word."""

from __future__ import annotations

import _thread
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import FrameType


@dataclass
class Stop:
    """Which signal stopped the run (None: none, or Ctrl-C)."""

    signal: str | None = None


@contextmanager
def sigterm_as_interrupt(stop: Stop) -> Iterator[None]:
    """While the block runs, SIGTERM is taken as Ctrl-C: the main thread gets the same interrupt (asyncio's
    own Ctrl-C handler cancels the run's task and then raises KeyboardInterrupt), and `stop` records it."""
    if threading.current_thread() is not threading.main_thread():
        yield  # signal handlers belong to the main thread (a run started from a worker thread keeps its own)
        return

    def on_sigterm(signum: int, frame: FrameType | None) -> None:
        stop.signal = "SIGTERM"
        if callable(signal.getsignal(signal.SIGINT)):
            _thread.interrupt_main()  # as a Ctrl-C arriving: whichever Ctrl-C handler is installed takes it
        else:  # Ctrl-C is ignored here (a background job of a shell): interrupt directly
            raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def where_stopped(run_dir: Path) -> str:
    """Where a stopped run stands, from its last checkpoint: the inner step it was in (1-based, as the progress
    line counts them; the steps before it are complete and kept)."""
    from ..rundir import RunReader

    try:
        checkpoint = RunReader(run_dir).checkpoint() if run_dir.is_dir() else None
    except Exception:  # a message about stopping must not fail on a damaged file; resume names it
        checkpoint = None
    done = checkpoint.state.get("next_step") if checkpoint is not None else None
    return f"in step {(done if isinstance(done, int) and done > 0 else 0) + 1}"
