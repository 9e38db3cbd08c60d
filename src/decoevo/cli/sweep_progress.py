"""Rich progress for a sweep: one bar for the grid, one per running cell (its inner steps, read from the
cell's checkpoint, which works the same for a local child and a Ray task on a shared filesystem, and one
unit for its post-run steps, so a cell's bar is full, and its timer stops, only when the cell is done)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from ..rundir import RunReader, RunReadError
from ..sweep.cell import CellOutcome
from ..sweep.plan import Cell


class SweepProgress:
    def __init__(self, console: Console, sweep_dir: Path, total_cells: int) -> None:
        self.console = console
        self.sweep_dir = sweep_dir
        self.progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn(), TextColumn("{task.fields[status]}"), console=console)
        self.grid = self.progress.add_task("sweep", total=max(total_cells, 1), status="")
        self.rows: dict[str, tuple[TaskID, Cell]] = {}

    def __enter__(self) -> SweepProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.progress.stop()

    def started(self, cell: Cell, action: str) -> None:
        row = self.progress.add_task(f"  {cell.id}", total=cell.total_steps + 1, status=action)
        self.rows[cell.id] = (row, cell)

    def skipped(self, cell: Cell) -> None:
        self.progress.advance(self.grid)
        self.console.log(f"[dim]{cell.id}: finished earlier, not rerun[/]")

    def finished(self, cell: Cell, outcome: CellOutcome | None, error: str | None = None) -> None:
        row = self.rows.pop(cell.id, None)
        if row is not None:
            self.progress.remove_task(row[0])
        self.progress.advance(self.grid)
        if outcome is not None and outcome.ok:
            what = ", ".join(x for x in ([f"trained ({outcome.trained})"] if outcome.trained != "none" else [])
                             + outcome.steps_run) or "nothing left to do"
            self.console.log(f"[green]✓[/] {cell.id}: {what} in {outcome.seconds:.1f}s")
        else:
            reason = error or (outcome.error if outcome else None) or "failed"
            self.console.log(f"[red]✗[/] {cell.id}: {escape(reason)}", highlight=False)

    def poll(self) -> None:
        for row, cell in self.rows.values():
            run_dir = cell.run_dir(self.sweep_dir)
            if (run_dir / "summary.json").is_file():
                self.progress.update(row, completed=cell.total_steps, status="post-run steps")
                continue
            try:
                checkpoint = RunReader(run_dir).checkpoint()
            except RunReadError:
                continue  # a checkpoint being replaced: the next poll reads the new one
            step = checkpoint.state.get("next_step") if checkpoint is not None else None
            if isinstance(step, int):  # None: the cell has not checkpointed yet
                self.progress.update(row, completed=step, status="training")


def sweep_bars(console: Console) -> Callable[[Path, int], SweepProgress]:
    """The observer factory `run_sweep` takes: bars on `console`."""
    return lambda sweep_dir, total_cells: SweepProgress(console, sweep_dir, total_cells)
