"""One process owns a run directory at a time.

An exclusive `flock` on RUN/.lock, held for as long as the run is being written. The kernel releases it
when the holder dies (a kill -9 included), so a stale lock never blocks a resume. The holder writes its
pid and command into the file, so the refusal can name it.
"""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path
from types import TracebackType

from ..errors import UserError
from .files import _check_no_links
from .records import LOCK


class RunLocked(UserError):
    """Another live process holds the run directory."""


class RunLock:
    def __init__(self, run_dir: Path | str) -> None:
        self.run_dir = Path(run_dir)
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        path = self.run_dir / LOCK
        _check_no_links(self.run_dir, path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise RunLocked(f"{self.run_dir} is in use by {holder}; wait for it to finish or stop it "
                            "(one process writes a run directory at a time)") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} ({' '.join(sys.argv[:3])[:200]})\n".encode(), 0)
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            # a released lock names no holder: a process that lives on after its run ended (a notebook, a
            # server, a test) is not taken by a watcher (rundir/progress.py) for the run's live writer
            os.ftruncate(self._fd, 0)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()
