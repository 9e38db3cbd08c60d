"""`decoevo reproduce OUT`: flags, the projection and the question before spending, then
`decoevo.reproduce` (plan, sweeps, evaluations) and the report. Printing only; the work is in the reproduce package."""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.markup import escape

from ..errors import ConfigError, validation_summary
from ..fileio import atomic_write_text
from ..lm import ModelSpec
from ..lm.pricing import cost_of_models
from ..lm.spend import CAP_ENV, ID_ENV, add_spent, at_cap, begin, check, read_spend
from ..lm.spend import FILE_ENV as SPEND_FILE_ENV
from . import reproduce_args as ra
from .boundary import printable
from .common import console, err_console, guarded

if TYPE_CHECKING:
    from ..reproduce import PostTask, ReproducePlan


def _spec(model: str | None, base_url: str | None, flags: str = "--base-url/--model") -> ModelSpec | None:
    try:
        if base_url:
            return ModelSpec(backend="openai", model=model or "default", base_url=base_url)
        if model:
            return ModelSpec(gguf_path=model, model=Path(model).stem)
    except ValueError as exc:
        raise ConfigError(f"{flags}: {validation_summary(exc)}") from None
    return None


def reproduce_command(
    out: Path = typer.Argument(..., help="The experiment's directory (created; an earlier one is resumed)."),
    model: str = typer.Option(None, help="The backbone for every optimization role: a model name at --base-url."),
    base_url: str = typer.Option(None, help="Its OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1"),
    grader_model: str = typer.Option(None, help="The gold grader and rubric matcher: a separate model."),
    grader_base_url: str = typer.Option(None, help="The grader's OpenAI-compatible server."),
    models_file: Path = typer.Option(
        None,
        "--models",
        help="A YAML with `solver:` and `grader:` model specs "
        "(prices, keys, backends), instead of the four flags above.",
    ),
    seeds: str = typer.Option(None, help="Comma-separated seeds (default 0,1,2,3,4 as the paper)."),
    benchmarks: str = typer.Option(None, help="Source benchmarks, comma-separated (default: healthbench, "
                                                 "writingbench, researchqa)."),
    tables: str = typer.Option(None, help="Which of the paper's results: 1,2,3,4,5,fig3 (default: all)."),
    preset: str = typer.Option(None, help="Run sizes: paper (default), default or quick."),
    data: list[str] = typer.Option(
        [],
        "--data",
        help="NAME=PATH, NAME=PATH:FORMAT or NAME=PATH:FORMAT@LIMIT for a benchmark (default: "
        "the fetched public file, `decoevo data fetch NAME`).",
    ),
    transfer_limit: int = typer.Option(None, min=1, help="Questions of each transfer benchmark (default: all)."),
    set_: list[str] = typer.Option([], "--set", help="Override a shared size: --set splits.test=50"),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask before spending."),
    plan_only: bool = typer.Option(False, "--plan-only", help="Print the plan (methods, seeds, runs per table, "
                                   "training calls and dollars, expected wall time) and stop; writes nothing. With "
                                   "every data file at hand, the evaluation is projected too."),
    ray_address: str = typer.Option(None, help="Run the training cells as Ray tasks: auto or HOST:PORT."),
    workers: int = typer.Option(None, min=1, help="Cells at once (default: the sweep's own choice)."),
    allow_self_grading: bool = typer.Option(
        False,
        "--allow-self-grading",
        help="Grade with the backbone itself (results labelled self-graded, not independent).",
    ),
    max_cost: float = typer.Option(None, "--max-cost", help="Stop the whole experiment (every run, grading "
                                   "included) at this many USD; kept in the plan, raise it to continue."),
) -> None:
    """The paper's whole experiment: Tables 1-5 and Figure 3, graded independently, with the report."""
    guarded(_reproduce)(
        out,
        model,
        base_url,
        grader_model,
        grader_base_url,
        models_file,
        seeds,
        benchmarks,
        tables,
        preset,
        data,
        transfer_limit,
        set_,
        yes,
        ray_address,
        workers,
        allow_self_grading,
        plan_only,
        max_cost,
    )


def _reproduce(
    out: Path,
    model: str | None,
    base_url: str | None,
    grader_model: str | None,
    grader_base_url: str | None,
    models_file: Path | None,
    seeds: str | None,
    benchmarks: str | None,
    tables: str | None,
    preset: str | None,
    data: list[str],
    transfer_limit: int | None,
    sets: list[str],
    yes: bool,
    ray_address: str | None,
    workers: int | None,
    allow_self_grading: bool,
    plan_only: bool = False,
    max_cost: float | None = None,
) -> None:
    from .. import reproduce as rp_mod
    from ..report import build_report, write
    from ..rundir import paid as paid_mod

    out = out.resolve()
    if max_cost is not None and not (math.isfinite(max_cost) and max_cost > 0):
        raise ConfigError(f"--max-cost {max_cost:g}: the cap is a positive number of US dollars")
    state = ra.read_state(out, rp_mod.STATE_FILE) or {}
    solver, grader = _spec(model, base_url), _spec(grader_model, grader_base_url, "--grader-base-url/--grader-model")
    if models_file is not None:
        solver, grader = ra.models_file(models_file, grader)
    if solver is None and "solver" not in state:
        raise ConfigError("name the backbone: --model NAME --base-url URL (or --models FILE)")
    known = [*rp_mod.SOURCES, *rp_mod.TRANSFERS.values()]
    bench_names = ra.csv("benchmarks", benchmarks) or state.get("benchmarks") or list(rp_mod.SOURCES)
    wanted = [*bench_names, *(rp_mod.TRANSFERS[b] for b in bench_names if b in rp_mod.TRANSFERS)]
    passed = ra.data(data, known)
    given = {
        **{k: v.config() for k, v in rp_mod.default_data(wanted).items()},
        **(state.get("data") or {}),
        **passed,
    }
    seed_list = ra.seeds(seeds)
    table_list = ra.csv("tables", tables)
    # data passed for a benchmark this experiment does not run would be stored and never read: refused
    unused = rp_mod.unused_data(list(passed), bench_names, table_list or state.get("tables")
                                or list(rp_mod.TABLES))
    if unused:
        raise ConfigError(unused)
    rp = rp_mod.plan_from_state(
        out,
        {"solver": None, "data": {}, **state},
        data=given,
        solver=solver.model_dump(mode="json", exclude_defaults=True) if solver else None,
        grader=grader.model_dump(mode="json", exclude_defaults=True) if grader else None,
        seeds=seed_list,
        benchmarks=bench_names,
        tables=table_list,
        preset=preset,
        shared=ra.sets(sets),
        transfer_limit=transfer_limit,
        allow_self_grading=allow_self_grading or None,
        max_cost=max_cost,
    )
    if plan_only:  # nothing written; the data read only when every file is at hand, for the evaluation
        for line in rp_mod.outline(rp, workers):
            console.print(line, highlight=False)
        projected = _plan_only_projection(rp)
        if projected:
            console.print(projected, highlight=False)
        if rp.max_cost is not None:
            console.print(f"cost cap: ${rp.max_cost:,.2f} for the whole experiment (--max-cost)", highlight=False)
        return
    console.print(f"grading: {rp.check_grader()}")
    cells = rp_mod.plan_cells(rp)
    if "fig3" in rp.tables and any(c.config["splits"]["diagnostic"] == 0 for g in cells.values() for c in g):
        raise ConfigError(
            "Figure 3 grades every checkpoint on a diagnostic split, and this plan has none: "
            "--set splits.diagnostic=N, or leave fig3 out of --tables"
        )
    ra.check_runs_match(cells, rp)
    ra.check_report(out)
    posts = rp_mod.post_tasks(rp)
    projection = rp_mod.project(rp, cells, posts, rp_mod.transfer_sizes(rp))
    remaining = bool(projection.cells_to_run or any(not t.done() for t in posts))
    spend_file = out / rp_mod.SPEND_FILE
    logged = read_spend(spend_file)  # a corrupt log (lm/spend.py) is one line here, before anything runs
    # a log emptied or deleted between runs would pay again from $0: what the ledgers and the runs' own
    # append-only call records say was paid counts (rundir/paid.py), in runs that are OUT's own
    paid_mod.refuse_links(out)
    recorded = max(rp_mod.paid_in_ledgers(out), paid_mod.paid_in_records(out, cost_of_models(_models(rp))))
    missing = _missing_spend(logged, recorded)
    spent = logged + missing
    if missing:
        console.print(f"{spend_file}: records ${logged:,.4f}, but the runs' ledgers and call records under {out} "
                      f"record ${spent:,.4f} paid (the log was emptied, edited or deleted); ${spent:,.4f} counts "
                      "as spent", highlight=False)
    if remaining and rp.max_cost is not None and (spent >= rp.max_cost or at_cap(spend_file, rp.max_cost)):
        raise ConfigError(_at_cap(out, spent, rp.max_cost))
    console.print(projection.describe())
    if rp.max_cost is not None:
        console.print(f"cost cap: ${rp.max_cost:,.2f} for the whole experiment, ${spent:,.2f} spent so far")
    if remaining and not yes:
        if not sys.stdin.isatty():
            raise ConfigError("this would spend model calls; pass --yes to run without asking")
        if not typer.confirm("Proceed?", default=False):
            raise typer.Exit(1)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / rp_mod.STATE_FILE, rp.to_yaml())  # replaced, never written through a link
    if missing:
        add_spent(spend_file, missing)
    identity = begin(spend_file)  # every process refuses the log once it is deleted or replaced (lm/spend.py)
    with _spend_env(spend_file, rp.max_cost, identity):
        failed = _run(rp, out, workers, ray_address, posts)
    check(spend_file, identity)  # deleted or replaced meanwhile: that one line, not the steps it stopped
    report = build_report([rp.sweep_dir(b) for b in rp.benchmarks], title="DecoEvo: the paper's experiment")
    ra.check_report(out)  # not replaced if somebody put their own there meanwhile
    path = write(report, out / ra.REPORT)
    console.print(f"report: {path}")
    for c in report.claims:
        console.print(f"  {c.verdict:>15}  {c.claim.id}")
    if failed:
        for line in failed:
            err_console.print(f"[red]failed[/] {escape(printable(line))}", highlight=False)
        if rp.max_cost is not None and at_cap(spend_file, rp.max_cost):
            raise ConfigError(_at_cap(out, read_spend(spend_file), rp.max_cost))
        console.print(f"{len(failed)} step(s) failed; run `decoevo reproduce {out}` again to retry them")
        raise typer.Exit(1)


def _plan_only_projection(rp: ReproducePlan) -> str | None:
    """With every data file at hand, the projection a run would print (training and evaluation, of what is
    still to run), computed without writing anything; None when some file is not there yet."""
    from .. import reproduce as rp_mod

    names = [*rp.benchmarks, *(rp_mod.TRANSFERS[b] for b in rp.benchmarks if b in rp_mod.TRANSFERS
                               and "1" in rp.tables)]
    if not all(n in rp.data and Path(rp.data[n].path).is_file() for n in names):
        return None
    cells = rp_mod.plan_cells(rp)
    return "projection from the data: " + rp_mod.project(rp, cells, rp_mod.post_tasks(rp),
                                                          rp_mod.transfer_sizes(rp)).describe()


def _models(rp: ReproducePlan) -> dict[str, ModelSpec | None]:
    """The model names the runs' records use (the plan's lm.models) and their specs, for their prices."""
    from ..reproduce.plan import GRADER_NAME

    return {"default": rp.solver, GRADER_NAME: rp.grader}


def _missing_spend(logged: float, paid: float) -> float:
    """What the spend log lacks of what the ledgers say was paid (0 within float rounding)."""
    return paid - logged if paid > logged + 1e-9 * max(1.0, paid) else 0.0


def _at_cap(out: Path, spent: float, cap: float) -> str:
    return (f"{out}: the experiment is at its cost cap, ${spent:,.4f} spent of --max-cost {cap:g}; "
            "run it again with a higher --max-cost USD to continue (nothing paid is paid again)")


@contextlib.contextmanager
def _spend_env(path: Path, cap: float | None, identity: str) -> Iterator[None]:
    """Every LM of the experiment (its cells' processes inherit DECOEVO_*) records its dollars in `path`
    and, with a cap, stops at it (lm/spend.py); restored afterwards for a caller in the same process."""
    wanted = {SPEND_FILE_ENV: str(path), CAP_ENV: repr(cap) if cap is not None else None, ID_ENV: identity}
    before = {k: os.environ.get(k) for k in wanted}
    _set_env(wanted)
    try:
        yield
    finally:
        _set_env(before)


def _set_env(values: dict[str, str | None]) -> None:
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _run(rp: ReproducePlan, out: Path, workers: int | None, ray_address: str | None,
         posts: list[PostTask]) -> list[str]:
    """The sweeps, then the evaluations after training; returns what failed."""
    from .. import reproduce as rp_mod
    from ..sweep import run_sweep
    from .sweep_progress import sweep_bars

    failed: list[str] = []
    for bench in rp.benchmarks:
        book = run_sweep(
            rp.sweep_spec(bench),
            rp.sweep_dir(bench),
            source=f"decoevo reproduce ({bench})",
            workers=workers,
            ray_address=ray_address,
            console=console,
            observer=sweep_bars(console),
        )
        failed += [f"{cell}: {s.error}" for cell, s in book.failed().items()]

    def said(task: PostTask, error: str | None) -> None:
        where = task.run_dir.relative_to(out) if task.run_dir.is_relative_to(out) else task.run_dir
        console.print(f"{task.kind} {where}: " + ("done" if error is None else "[red]failed[/] (below)"))

    failures = asyncio.run(rp_mod.run_post(posts, on_done=said))
    return failed + [f"{t.kind} {t.run_dir}: {msg}" for t, msg in failures]
