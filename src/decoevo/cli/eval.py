"""`decoevo eval`, `dynamics` and `align`: grade runs' skills, score their checkpoints, match their rubrics
(flags and printing; the work is in `decoevo.api`)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from ..errors import ConfigError, UserError, validation_summary
from ..lm import LMError, ModelSpec
from ..redact import redact
from ..rundir.evalfiles import short_model_name
from .boundary import printable
from .common import JsonOption, console, err_console, fail, guarded, warn
from .data import choose_data
from .display import print_json
from .settings import refuse_empty


def model_spec_from_flags(model: str | None, base_url: str | None) -> ModelSpec:
    if base_url:
        return ModelSpec(backend="openai", model=model or "default", base_url=base_url)
    if model:
        return ModelSpec(gguf_path=model, model=Path(model).stem)
    return ModelSpec()


RunDirs = typer.Argument(..., help="Run directories made by `decoevo run` (or a sweep's runs).")
GraderModel = typer.Option(None, "--grader-model", help="Gold grader: a GGUF path, or a model name at "
                           "--grader-base-url. Default: the run's own model (checks the pipeline; the result is "
                           "labelled self-graded, not an independent result).")
GraderBaseUrl = typer.Option(None, "--grader-base-url", help="OpenAI-compatible server for the gold grader.")


def _grader_spec(model: str | None, base_url: str | None) -> ModelSpec | None:
    if not model and not base_url:
        return None
    try:
        return model_spec_from_flags(model, base_url)
    except ValueError as exc:
        fail(f"--grader-base-url/--grader-model: {validation_summary(exc)}")
        raise


def _known(count: Any, run_dir: Path) -> int | None:
    """How many items the bar counts to (`N/N`, not `4/?`), when reading it is cheap and it reads; the
    job itself reports a run it cannot read."""
    try:
        return count(run_dir) if count is not None else None
    except Exception:  # only the bar's total: the job itself names the problem
        return None


def questions_in(split: str, target: dict[str, Any] | None) -> Any:
    """The number of questions `eval` grades: the run's split, or the transfer file (after its limit)."""
    def count(run_dir: Path) -> int | None:
        if target is not None:
            from ..engine.config import DataConfig
            from ..tasks.load import load_questions

            return len(load_questions(DataConfig.model_validate(target)))
        from ..rundir import RunReader

        ids = RunReader(run_dir).split_ids().get(split)
        return None if ids is None else len(ids)
    return count


def checkpoints_in(run_dir: Path) -> int:
    """The number of checkpoints `dynamics` scores."""
    from ..evaluation import RunView

    return len(RunView(run_dir).timeline())


def _each_run(run_dirs: list[Path], title: str, job: Any, as_json: bool = False, count: Any = None) -> None:
    """Run `job(run_dir, progress_callback)` for every run; one failing run does not stop the others.
    A job returns (summary line, ok): not ok (nothing graded, or the result was not saved) fails the command.
    `count(run_dir)`: how many items the job will tick, when it is known before it starts."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    failed = user_errors = 0
    for run_dir in run_dirs:
        try:
            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                          console=err_console if as_json else console, transient=True) as progress:
                bar = progress.add_task(f"{title} {run_dir.name}", total=_known(count, run_dir))

                def tick(bar: Any = bar, progress: Any = progress) -> None:
                    progress.update(bar, advance=1)

                summary, ok, record = job(run_dir, tick)
            if ok and as_json:
                print_json({"run_dir": str(run_dir), **record})
            elif ok:
                console.print(escape(printable(f"{run_dir}: {summary}")), highlight=False)
            else:
                failed += 1
                err_console.print(f"[bold red]error:[/] {escape(printable(f'{run_dir}: {summary}'))}", highlight=False)
        except (UserError, LMError) as exc:
            failed += 1
            user_errors += isinstance(exc, UserError)
            where = "" if str(run_dir) in str(exc) else f"{run_dir}: "
            if len(run_dirs) == 1 and isinstance(exc, UserError):  # one run refused: its one line says it all
                fail(f"{where}{exc}")
            err_console.print(f"[bold red]error:[/] {escape(printable(redact(f'{where}{exc}')))}", highlight=False)
        except KeyboardInterrupt:
            fail(f"interrupted (Ctrl-C) while {title} {run_dir}: no result was written for it. Run the same "
                 "command again: answers already paid for come from the cache", 130)
    if failed:
        fail(f"{failed} of {len(run_dirs)} run(s) could not be evaluated (see above); fix them and rerun; "
             "answers already paid for come from the cache", code=2 if user_errors else 1)


def _saved(record: dict[str, Any], graded: int, what: str) -> tuple[str, bool, dict[str, Any]]:
    """The summary line, whether the command succeeded (something graded, and the result saved), the record."""
    if graded == 0:
        return f"{what}: nothing could be graded; no result written (details in RUN/eval/failed/)", False, record
    if "kept_previous" in record:
        return f"{what}: {record['kept_previous']}", False, record
    return what, True, record


def version_label(record: dict[str, Any]) -> str:
    """`v003 (shipped)`, `v000 (initial)`: the solver version a score belongs to, said on every score line."""
    version, shipped = record.get("skill_version"), record.get("shipped_version")
    if not isinstance(version, int):
        return "version unknown"
    which = [w for w, yes in (("initial", version == 0), ("shipped", version == shipped)) if yes]
    return f"v{version:03d}" + (f" ({', '.join(which)})" if which else "")


def _fmt(x: float | None, scale: float = 1.0) -> str:
    return "n/a" if x is None else f"{x * scale:.1f}"


Force = typer.Option(False, "--force", help="Replace an earlier result even if this one graded fewer questions.")


@guarded
def eval_(
    run_dirs: list[Path] = RunDirs,
    split: str = typer.Option("test", help="The run's split to grade on (test by default)."),
    data: str = typer.Option(None, help="Transfer: grade on every question of this benchmark file instead."),
    fmt: str = typer.Option(None, "--format", help="Format of --data (e.g. llmeval_med, eqbench_cw)."),
    benchmark: str = typer.Option(None, "--benchmark", help="Transfer: grade on a fetched public benchmark, "
                                  "NAME[:split], instead of --data."),
    limit: int = typer.Option(None, min=1, help="Transfer: use only the first N questions (sorted by id); a "
                              "run's own split is graded whole."),
    skill_version: int = typer.Option(None, min=0, help="Grade this solver version instead of the final one."),
    grader_model: str = GraderModel,
    grader_base_url: str = GraderBaseUrl,
    grader_prompt: str = typer.Option("auto", help="auto: the benchmark's official grader prompt when `decoevo "
                                      "data fetch` fetched it, else ours; official; ours."),
    force: bool = Force,
    concurrency: int = typer.Option(None, min=1, help="Questions graded at once (default: the run's)."),
    as_json: bool = JsonOption,
) -> None:
    """Grade a run's solver skill with the benchmark's official rule; writes RUN/eval/<name>-v<N>-<grader>.json.

    One file per skill version and grader: grading another version (--skill-version 0) never replaces a result."""
    from ..api import evaluate_async
    from ..evaluation.independence import SELF_GRADED_LABEL
    from .shipped import unfinished_warning

    refuse_empty(data=data, format=fmt, benchmark=benchmark, grader_model=grader_model,
                 grader_base_url=grader_base_url)
    grader = _grader_spec(grader_model, grader_base_url)
    if data and not fmt:
        fail("--data needs --format (the benchmark's format, e.g. llmeval_med or eqbench_cw)")
    if limit is not None and not (data or benchmark):
        # a run's split is graded whole: a first-N result would be saved as eval/<split>.json, its score
        fail(f"--limit {limit} applies to transfer data (--data or --benchmark); the run's {split} split is "
             f"graded whole (a run sets its size: splits.{split})")
    path: str | None = data
    path_fmt: str | None = fmt
    if data or benchmark:
        try:
            path, path_fmt = choose_data(data, fmt, benchmark)
        except ConfigError as exc:
            fail(str(exc))
    target = {"path": path, "format": path_fmt or "jsonl", "limit": limit} if path else None

    def job(run_dir: Path, tick: Any) -> tuple[str, bool, dict[str, Any]]:
        unfinished = unfinished_warning(run_dir, "this grades") if skill_version is None else None
        if unfinished:  # as `export` warns: a killed or running run's skill is not what it will ship
            warn(unfinished)
        r = asyncio.run(evaluate_async(run_dir, split=split, data=target, grader=grader, skill_version=skill_version,
                                       force=force, on_item=lambda _: tick(), grader_prompt=grader_prompt,
                                       concurrency=concurrency))
        return _saved(r, r["n_graded"], f"{r['name']} {r['benchmark']}, solver {version_label(r)}: score "
                                        f"{_fmt(r['score'])} ({r['n_graded']} graded, {r['n_ungraded']} ungraded; "
                                        f"grader {short_model_name(r['grader_model'])}, {r['grader_prompt']} prompt"
                                        f"{'; ' + r['not_implemented'] if r.get('not_implemented') else ''}"
                                        f"{', ' + SELF_GRADED_LABEL if r.get('self_graded') else ''}) -> {r['file']}")

    _each_run(run_dirs, "grading", job, as_json, count=questions_in(split, target))


@guarded
def dynamics(
    run_dirs: list[Path] = RunDirs,
    split: str = typer.Option("diagnostic", help="The held-out split to track (diagnostic by default)."),
    grader_model: str = GraderModel,
    grader_base_url: str = GraderBaseUrl,
    force: bool = Force,
    as_json: bool = JsonOption,
) -> None:
    """Score every checkpoint on the diagnostic split: generated-rubric proxy and gold grade (Figure 3)."""
    from ..api import dynamics_async
    from ..evaluation.independence import SELF_GRADED_LABEL

    grader = _grader_spec(grader_model, grader_base_url)

    def job(run_dir: Path, tick: Any) -> tuple[str, bool, dict[str, Any]]:
        r = asyncio.run(dynamics_async(run_dir, split=split, grader=grader, force=force, on_point=lambda _: tick()))
        graded = sum(1 for p in r["points"] if p.get("gold") is not None or p.get("proxy") is not None)
        return _saved(r, graded, "; ".join(f"step {p['step']}: proxy {_fmt(p['proxy'])} gold {_fmt(p['gold'])}"
                                           for p in r["points"]) + (f" (gold {SELF_GRADED_LABEL})"
                                                                    if r.get("self_graded") else ""))

    _each_run(run_dirs, "checkpoints", job, as_json, count=checkpoints_in)


@guarded
def align(
    run_dirs: list[Path] = RunDirs,
    split: str = typer.Option("test", help="Questions whose rubrics are compared (test by default)."),
    matcher_model: str = typer.Option(None, "--matcher-model", help="Matcher: a GGUF path or a model name at "
                                      "--matcher-base-url. Default: the grader model, else the run's model."),
    matcher_base_url: str = typer.Option(None, "--matcher-base-url", help="OpenAI-compatible server for the matcher."),
    grader_model: str = GraderModel,
    grader_base_url: str = GraderBaseUrl,
    force: bool = Force,
    as_json: bool = JsonOption,
) -> None:
    """Criterion-level P/R/F1 of the final generated rubrics against the gold rubrics (Table 5)."""
    from ..api import align_async

    grader = _grader_spec(grader_model, grader_base_url)
    matcher = _grader_spec(matcher_model, matcher_base_url)

    def job(run_dir: Path, tick: Any) -> tuple[str, bool, dict[str, Any]]:
        r = asyncio.run(align_async(run_dir, split=split, grader=grader, matcher=matcher, force=force))
        return _saved(r, r["n_questions"], f"P {_fmt(r['precision'], 100)} R {_fmt(r['recall'], 100)} "
                                           f"F1 {_fmt(r['f1'], 100)} over {r['n_questions']} question(s) "
                                           f"({r['n_failed']} failed; matcher {r['matcher_model']}"
                                           f"{', not independent' if r.get('matcher_self_graded') else ''})")

    _each_run(run_dirs, "matching", job, as_json)
