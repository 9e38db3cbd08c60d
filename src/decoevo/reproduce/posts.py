"""The evaluations after training (transfer, dynamics, alignment of one run each) and running them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..sweep.plan import cap_stopped, run_dir_of
from .plan import HEALTHBENCH, MAIN, TRACKED, TRANSFERS, DataChoice, ReproducePlan


@dataclass(frozen=True)
class PostTask:
    """One evaluation after training: transfer, dynamics or alignment of one run."""

    kind: str  # transfer | dynamics | alignment
    run_dir: Path
    data: DataChoice | None = None
    benchmark: str = ""  # a transfer's benchmark: its eval file is transfer-<benchmark>.json

    @property
    def output(self) -> Path:
        name = {"dynamics": "dynamics.json", "alignment": "alignment.json"}.get(self.kind)
        if name is None:
            assert self.data is not None
            # named by the benchmark, not the data format: two JSONL transfers would share "transfer-jsonl"
            name = f"transfer-{self.benchmark or self.data.format}.json"
        return self.run_dir / "eval" / name

    def done(self) -> bool:
        if self.output.is_file():  # dynamics, alignment, or a transfer graded before one file per version
            return True
        # a transfer's result is transfer-<benchmark>-v<NNN>-<grader>.json (rundir/evalfiles.py)
        return self.kind == "transfer" and any(self.output.parent.glob(f"{self.output.stem}-v*.json"))



def post_tasks(rp: ReproducePlan) -> list[PostTask]:
    tasks: list[PostTask] = []
    for bench in rp.benchmarks:
        sweep_dir = rp.sweep_dir(bench)
        transfer = rp.transfer_for(bench)
        for seed in rp.seeds:
            for method in rp.methods_for(bench):
                run = run_dir_of(sweep_dir.resolve(), bench, method, seed)
                if transfer is not None and method in MAIN:
                    tasks.append(PostTask("transfer", run, transfer, TRANSFERS[bench]))
                if "fig3" in rp.tables and bench == HEALTHBENCH and method in TRACKED:
                    tasks.append(PostTask("dynamics", run))
                if "5" in rp.tables and method in TRACKED:
                    tasks.append(PostTask("alignment", run))
    return tasks


async def run_post(
    tasks: Sequence[PostTask], *, concurrency: int = 4, on_done: Callable[[PostTask, str | None], None] | None = None
) -> list[tuple[PostTask, str]]:
    """Run the evaluations not done yet whose run finished; returns the failures (task, message). A failure
    leaves no output file, so the next invocation retries it."""
    from .. import api

    gate = asyncio.Semaphore(concurrency)
    failures: list[tuple[PostTask, str]] = []

    async def one(task: PostTask) -> None:
        if task.done():
            return
        if not (task.run_dir / "summary.json").is_file() or cap_stopped(task.run_dir):
            failures.append((task, f"{task.run_dir} did not finish training"))
            return
        async with gate:
            try:
                if task.kind == "transfer":
                    assert task.data is not None
                    await api.evaluate_async(task.run_dir, data=task.data.config(), name=task.benchmark or None)
                elif task.kind == "dynamics":
                    await api.dynamics_async(task.run_dir)
                else:
                    await api.align_async(task.run_dir)
            except Exception as exc:  # one task's failure is reported; the others go on
                failures.append((task, f"{type(exc).__name__}: {exc}"))
                if on_done is not None:
                    on_done(task, str(exc))
                return
        if on_done is not None:
            on_done(task, None if task.done() else "wrote no output (nothing could be graded)")
        if not task.done():
            failures.append((task, "wrote no output (nothing could be graded)"))

    await asyncio.gather(*(one(t) for t in tasks))
    return failures

