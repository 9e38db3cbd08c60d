"""Run a planned grid: start each cell when a slot is free and its dependencies are done; record every
cell's state in SWEEP/status.json; keep going past failed cells (their dependents are not run)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from rich.console import Console

from ..lm.errors import ConfigError
from ..lm.shared_slots import ENV as SHARED_SLOTS_ENV
from ..lm.spend import CAP_STOP
from .cell import CellOutcome, CellRequest, driver_env
from .executors import Executor, LocalExecutor, RayExecutor
from .plan import Cell, CellConflict, action_for, cap_stopped, plan, waits_on_servers
from .spec import SPEC_FILE, SweepSpec
from .status import StatusBook
from .steps import check_available

POLL_S = 0.5
SLOTS_DIR = ".slots"  # SWEEP/.slots/<endpoint>/slot-<i>: the endpoints' concurrency, shared by the cells


def check_sweep_dir(sweep_dir: Path) -> None:
    """A sweep writes status.json, sweep.yaml, .lock and runs/ at the top of its directory: one that holds
    files but no sweep.yaml is somebody's own, and none of it may be written over."""
    if not sweep_dir.is_dir() or (sweep_dir / SPEC_FILE).is_file():
        return
    held = sorted(p.name for p in sweep_dir.iterdir())
    if held:
        shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
        raise ConfigError(f"{sweep_dir} exists and is not a sweep directory (it holds {shown}); name a new or "
                          "empty directory")


class SweepObserver(Protocol):
    """What the scheduler tells as cells change (the command line's progress bars); a context manager
    around the whole grid."""

    def __enter__(self) -> Any: ...
    def __exit__(self, *exc: Any) -> Any: ...
    def started(self, cell: Cell, action: str) -> None: ...
    def skipped(self, cell: Cell) -> None: ...
    def finished(self, cell: Cell, outcome: CellOutcome | None, error: str | None = None) -> None: ...
    def poll(self) -> None: ...


class Silent:
    """The observer of a sweep run without a terminal."""

    def __enter__(self) -> Silent:
        return self

    def __exit__(self, *exc: Any) -> None:
        return None

    def started(self, cell: Cell, action: str) -> None:
        return None

    def skipped(self, cell: Cell) -> None:
        return None

    def finished(self, cell: Cell, outcome: CellOutcome | None, error: str | None = None) -> None:
        return None

    def poll(self) -> None:
        return None


# (sweep directory, number of cells) -> the observer of that grid
ObserverFactory = Callable[[Path, int], SweepObserver]


@contextmanager
def sweep_lock(sweep_dir: Path) -> Iterator[None]:
    """One driver per sweep directory: two would run the same cells into the same run directories."""
    sweep_dir.mkdir(parents=True, exist_ok=True)
    with open(sweep_dir / ".lock", "w") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ConfigError(f"another `decoevo sweep` is running in {sweep_dir}; wait for it or stop it") from None
        yield


def run_sweep(spec: SweepSpec, sweep_dir: Path, *, source: str = "the sweep spec", workers: int | None = None,
              threads: int | None = None, ray_address: str | None = None, use_ray: bool = False,
              console: Console | None = None, observer: ObserverFactory | None = None) -> StatusBook:
    """Plan the grid, write SWEEP/sweep.yaml, and run every cell that is not finished.

    Raises ConfigError (before any cell runs) for a bad spec, data, or a missing post-run command."""
    console = console or Console()
    sweep_dir = sweep_dir.resolve()
    check_available(spec.evaluate)
    check_sweep_dir(sweep_dir)
    cells = plan(spec, sweep_dir, source)
    _refuse_changed(cells, sweep_dir, spec.evaluate)
    # The executor first (a Ray cluster that refuses the connection stops here): a sweep that cannot start
    # writes nothing, so its directory is not left looking like somebody's own files to the next attempt.
    todo = sum(1 for c in cells if _planned_action(c, sweep_dir, spec.evaluate) != "skip")
    io_bound = all(waits_on_servers(c.config) for c in cells)
    executor: Executor
    if use_ray or ray_address:
        executor = RayExecutor(todo, ray_address, workers or spec.workers, threads, io_bound)
    else:
        executor = LocalExecutor(todo, workers or spec.workers, threads, io_bound=io_bound)
    with sweep_lock(sweep_dir):
        (sweep_dir / SPEC_FILE).write_text(spec.to_yaml(), encoding="utf-8")
        console.print(f"sweep {sweep_dir}: {len(cells)} cells, {todo} to run "
                      f"({executor.describe()}); logs in each run directory's sweep.log")
        return execute_plan(cells, sweep_dir, executor, spec.evaluate, observer)


def _refuse_changed(cells: list[Cell], sweep_dir: Path, evaluate: list[str]) -> None:
    """A continued sweep whose spec changed a cell's configuration (another model, parity dropped or added)
    is refused in one line before SWEEP/sweep.yaml or a status is rewritten, as `decoevo reproduce` refuses
    a changed flag: before, each such cell failed after the new spec had replaced the old one."""
    for cell in cells:
        try:
            action_for(cell, sweep_dir, evaluate)
        except CellConflict as exc:
            stored = sweep_dir / SPEC_FILE
            raise ConfigError(f"{exc}: this sweep's runs were made with another spec ({stored} holds it); "
                              "continue it without the changed flags or spec, or name a new sweep directory"
                              ) from None


def _planned_action(cell: Cell, sweep_dir: Path, evaluate: list[str]) -> str:
    try:
        return action_for(cell, sweep_dir, evaluate)
    except CellConflict:
        return "conflict"


def _blocked(cell: Cell, by_id: dict[str, Cell], book: StatusBook, sweep_dir: Path) -> str:
    """Why a cell whose paired run did not finish is not run: a cost-cap stop (which continues when the cap
    is raised) is not a failure of that run."""
    failed = [d for d in cell.depends_on if book.cells[d].state == "failed"]
    capped = [d for d in failed if d in by_id and (cap_stopped(by_id[d].run_dir(sweep_dir))
                                                   or CAP_STOP in (book.cells[d].error or ""))]
    if capped and len(capped) == len(failed):
        return (f"not run: {', '.join(capped)} (its paired run) stopped at the experiment's cost cap; "
                "it runs when the cap is raised")
    return f"not run: {', '.join(failed)} (its paired run) failed"


def execute_plan(cells: list[Cell], sweep_dir: Path, executor: Executor, evaluate: list[str],
                 observer: ObserverFactory | None = None) -> StatusBook:
    book = StatusBook(sweep_dir, cells)
    by_id = {c.id: c for c in cells}
    waiting = list(cells)
    running: dict[Any, Cell] = {}
    # The driver's own DECOEVO_SHARED_SLOTS wins: several sweeps may share one server's budget.
    env, cwd = {SHARED_SLOTS_ENV: str(sweep_dir / SLOTS_DIR), **driver_env()}, os.getcwd()
    with (observer or (lambda _dir, _n: Silent()))(sweep_dir, len(cells)) as progress:
        try:
            while waiting or running:
                for cell in list(waiting):
                    deps = [book.cells[d].state for d in cell.depends_on]
                    if "failed" in deps:
                        waiting.remove(cell)
                        error = _blocked(cell, by_id, book, sweep_dir)
                        book.set(cell.id, "failed", error=error)
                        progress.finished(cell, None, error)
                        continue
                    if any(s != "done" for s in deps) or len(running) >= executor.slots:
                        continue
                    waiting.remove(cell)
                    try:
                        action = action_for(cell, sweep_dir, evaluate)
                    except CellConflict as exc:
                        book.set(cell.id, "failed", error=str(exc))
                        progress.finished(cell, None, str(exc))
                        continue
                    if action == "skip":
                        book.set(cell.id, "done", action="skip", error=None)
                        progress.skipped(cell)
                        continue
                    request = CellRequest(cell_id=cell.id, run_dir=str(cell.run_dir(sweep_dir)), config=cell.config,
                                          threads=executor.threads, evaluate=evaluate, env=env, cwd=cwd)
                    running[executor.submit(request)] = cell
                    book.set(cell.id, "running", action=action, error=None)
                    progress.started(cell, action)
                if not running:
                    if waiting:  # the planner puts every dependency in the plan, before its dependents
                        raise RuntimeError(f"sweep scheduler stuck on {[c.id for c in waiting]}")
                    break
                for handle, result in executor.wait(list(running), POLL_S):
                    cell = running.pop(handle)
                    outcome = result if isinstance(result, CellOutcome) else CellOutcome(
                        cell_id=cell.id, ok=False, error=f"the cell's task failed: {type(result).__name__}: {result}")
                    book.set(cell.id, "done" if outcome.ok else "failed", error=outcome.error, host=outcome.host,
                             seconds=outcome.seconds)
                    progress.finished(cell, outcome)
                progress.poll()
        except BaseException:
            for cell in running.values():  # interrupted, not failed: the next sweep resumes them
                book.set(cell.id, "pending", error="interrupted")
            executor.close(cancel=True)
            raise
        executor.close(cancel=False)
    return book
