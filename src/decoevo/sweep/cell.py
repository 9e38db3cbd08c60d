"""One cell, run in a child process: train (new run or `decoevo resume`), then the post-run steps.

`execute_cell` is what every executor calls, on whatever machine runs the cell: it starts
`python -m decoevo.cli.sweep_cell` (the request on stdin) with the thread settings in its environment, appends
the child's output to RUN/sweep.log, and returns the child's outcome. A child process per cell keeps one cell's
OpenMP threads, memory and crashes away from the sweep and from the other cells; and the child does
what `decoevo run` / `decoevo resume` do, through the same function (`decoevo.cli.run_progress.run_with_progress`).

What the cell still needs is read from its run directory in the child, so a cell killed at any point
is continued by running it again: no config.yaml → a new run; no summary.json → resume; then each
post-run step whose output file is missing.
"""

from __future__ import annotations

import ctypes
import errno
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

LOG_FILE = "sweep.log"
# The child is the command line's `run`/`resume` (progress, usage table, closing lines) followed by the
# post-run steps, in its own process; the library names it here and never imports it.
CHILD_MODULE = "decoevo.cli.sweep_cell"
OUTCOME_FILE = ".sweep-outcome.json"  # written by the child; read and removed by execute_cell


class CellRequest(BaseModel):
    """Everything a cell process needs; plain JSON so it crosses process and machine boundaries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cell_id: str
    run_dir: str  # absolute; on a filesystem the sweep driver and the executing machine share
    config: dict[str, Any]  # the resolved RunConfig for a new run (a resumed run keeps its config.yaml)
    threads: int = Field(ge=1)
    evaluate: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict, description="extra environment (DECOEVO_* of the driver)")
    cwd: str | None = None  # the driver's working directory, for relative paths inside the config


class CellOutcome(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cell_id: str
    ok: bool
    trained: str = "none"  # "new" | "resume" | "none" (already finished)
    steps_run: list[str] = Field(default_factory=list)
    error: str | None = None
    seconds: float = 0.0
    host: str = ""


def driver_env() -> dict[str, str]:
    """The driver's DECOEVO_* settings (cache path, shared data), forwarded to cells on other machines.
    API keys are not forwarded: a cluster's machines get them from their own environment."""
    return {k: v for k, v in os.environ.items() if k.startswith("DECOEVO_")}


def child_env(request: CellRequest) -> dict[str, str]:
    env = {**os.environ, **request.env}
    # llama.cpp's OpenMP pool: two cells that each take every core slow each other several-fold.
    env["OMP_NUM_THREADS"] = str(request.threads)
    env.setdefault("COLUMNS", "160")  # the log is a file; let rich's tables keep their columns
    env["PYTHONUNBUFFERED"] = "1"  # the log follows the cell live (`tail -f`) and keeps its last lines on a kill
    return env


def _parent_death_signal() -> Callable[[], None] | None:
    """Linux: a function that makes the calling (child) process get SIGTERM when the process that started
    it dies (a killed sweep, a cancelled Ray task), instead of running on as an orphan that holds cores.
    libc is loaded here, in the parent: the function runs between fork and exec, where importing or
    allocating could deadlock on a lock another thread held at the fork."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    pr_set_pdeathsig, sigterm = 1, int(signal.SIGTERM)
    return lambda: prctl(pr_set_pdeathsig, sigterm)


_DIE_WITH_PARENT = _parent_death_signal()


def execute_cell(request: CellRequest, on_start: Callable[[subprocess.Popen[bytes]], None] | None = None
                 ) -> CellOutcome:
    """Run one cell in a child process and return its outcome (never raises for a failed cell)."""
    started = time.monotonic()
    run_dir = Path(request.run_dir)
    try:  # the cell's log is a file of its run: never appended to through a link (rundir/files.py)
        for path in (run_dir, run_dir / LOG_FILE):
            if path.is_symlink():
                raise OSError(errno.ELOOP, "is a symbolic link; decoevo does not write through links in a run "
                              "directory (replace it with what it points to)", str(path))
        run_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(run_dir / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o644)
    except OSError as exc:
        return CellOutcome(cell_id=request.cell_id, ok=False, seconds=time.monotonic() - started,
                           host=os.uname().nodename, error=f"{exc.filename or run_dir}: {exc.strerror or exc}")
    outcome_file = run_dir / OUTCOME_FILE
    outcome_file.unlink(missing_ok=True)
    with os.fdopen(fd, "ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%d %H:%M:%S')} cell {request.cell_id} on {os.uname().nodename}, "
                  f"{request.threads} thread(s) ===\n".encode())
        log.flush()
        proc = subprocess.Popen([sys.executable, "-m", CHILD_MODULE], stdin=subprocess.PIPE,
                                stdout=log, stderr=subprocess.STDOUT, env=child_env(request),
                                cwd=request.cwd if request.cwd and Path(request.cwd).is_dir() else None,
                                preexec_fn=_DIE_WITH_PARENT)
        if on_start is not None:
            on_start(proc)
        assert proc.stdin is not None
        try:  # the request on stdin: no size limit, and the configuration stays out of `ps`
            proc.stdin.write(request.model_dump_json().encode())
            proc.stdin.close()
        except BrokenPipeError:  # the child died at start; its exit code tells
            pass
        code = proc.wait()
    if outcome_file.is_file():
        outcome = CellOutcome.model_validate_json(outcome_file.read_text(encoding="utf-8"))
        outcome_file.unlink()
        return outcome
    how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
    return CellOutcome(cell_id=request.cell_id, ok=False, error=f"the cell process {how} before it finished; see "
                       f"{run_dir / LOG_FILE}", seconds=time.monotonic() - started, host=os.uname().nodename)
