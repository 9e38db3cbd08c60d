"""`decoevo compare`: the initial and the shipped solver skill on the same questions, paired per question
(flags and printing; the work is in `decoevo.api.compare`)."""

from __future__ import annotations

import asyncio
import math
import shlex
import textwrap
from itertools import zip_longest
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape

from ..errors import ConfigError
from ..rundir.evalfiles import short_model_name
from .boundary import printable
from .common import JsonOption, console, current_width, err_console, fail, guarded, warn
from .data import choose_data
from .eval import Force, GraderBaseUrl, GraderModel, RunDirs, _each_run, _grader_spec, _saved, questions_in
from .settings import refuse_empty

SHOWN_CRITERIA = 3  # changed criteria listed per question (the report lists them all)


def _score(x: float | None) -> str:
    return "—" if x is None else f"{x:.1f}"


def _delta(x: float | None) -> str:
    return "—" if x is None else f"{x:+.1f}"


def _value(x: float | None) -> str:
    return "?" if x is None else f"{x:g}"


def _cut(lines: list[str], keep: int, width: int) -> list[str]:
    """At most `keep` lines; a cut marked with '…' at the end of the last one kept."""
    if len(lines) <= keep:
        return lines
    last = lines[keep - 1]
    return [*lines[:keep - 1], (last[:width - 1] if len(last) >= width else last) + "…"]


def _criteria(changed: list[dict[str, Any]], width: int) -> list[str]:
    """One entry per changed criterion, '+' where the shipped skill scored higher and '-' lower, each cut to
    two lines; the first SHOWN_CRITERIA of them."""
    if not changed:
        return ["none"]
    out: list[str] = []
    for c in changed[:SHOWN_CRITERIA]:
        b, a = c.get("before"), c.get("after")
        sign = "+" if a is not None and (b is None or a > b) else "-"
        text = f"{sign} {c.get('criterion', '')} ({_value(b)}→{_value(a)})"
        out += _cut(textwrap.wrap(" ".join(text.split()), width, subsequent_indent="  ") or [sign], 2, width)
    if len(changed) > SHOWN_CRITERIA:
        out.append(f"… {len(changed) - SHOWN_CRITERIA} more")
    return out


def side_names(record: dict[str, Any]) -> tuple[str, str]:
    """The two columns' names: `v000`, `v003`, or `file` for a skill from a file (`--skill`)."""
    after = record.get("after_version")
    return f"v{record['before_version']:03d}", "file" if after is None else f"v{after:03d}"


def per_question_table(record: dict[str, Any], width: int = 80) -> list[str]:
    """The per-question table: question (id and text), both scores, Δ, the criteria whose grade changed;
    every line at most `width` characters (the question's text is cut, the report has it whole)."""
    width = max(60, width)
    q_width = max(16, min(30, (width - 26) * 2 // 5))
    c_width = width - q_width - 6 - 6 - 7 - 5
    before, after = side_names(record)
    head = "criteria that changed" if c_width >= 21 else "changed"
    lines = [f"{'question':<{q_width}} {before:>6} {after:>6} {'Δ':>7}  {head}"]
    for row in record["rows"]:
        asked = " ".join(f"{row['question_id']}: {row.get('question', '')}".split())
        q_lines = _cut(textwrap.wrap(asked, q_width) or [row["question_id"][:q_width]], 2, q_width)
        c_lines = _criteria(row.get("changed") or [], c_width)
        numbers = f"{_score(row['before']['score']):>6} {_score(row['after']['score']):>6} {_delta(row['delta']):>7}"
        for i, (q, c) in enumerate(zip_longest(q_lines, c_lines, fillvalue="")):
            middle = numbers if i == 0 else " " * len(numbers)
            lines.append(f"{q:<{q_width}} {middle}  {c}".rstrip())
    paired = f"mean ({record['n_paired']} paired)"
    mean = (f"{paired:<{q_width}} {_score(record['before_score']):>6} {_score(record['after_score']):>6} "
            f"{_delta(record['mean_delta']):>7}")
    ci = ci_text(record)
    if len(mean) + 2 + len(ci) <= width:
        return [*lines, f"{mean}  {ci}"]
    return [*lines, mean, *textwrap.wrap(ci, width, initial_indent="  ", subsequent_indent="  ")]


def ci_text(record: dict[str, Any]) -> str:
    if record.get("ci_low") is not None and record.get("ci_high") is not None:
        return f"95% CI [{record['ci_low']:+.1f}, {record['ci_high']:+.1f}]"
    return f"no CI: {record.get('note') or 'fewer than 2 paired questions'}"


def summary_lines(run_dir: Path, record: dict[str, Any], width: int = 80) -> list[str]:
    """What `compare` prints for one run: what was compared, the table, the result, where it is, and how to
    make it independent when the grader is one of the run's own models."""
    where = (record["split"] and f"the {record['split']} split") or f"{record['data']}"
    before, after = side_names(record)
    skill_file = record.get("after_skill")
    what = (f"the run's v{record['before_version']:03d} vs the skill in {skill_file['path']}" if skill_file
            else f"initial {before} vs shipped {after}")
    lines = [f"{what} on {where}: "
             f"{record['n_questions']} question(s), {record['n_paired']} graded under both; grader "
             f"{short_model_name(record['grader_model'])}, {record['grader_prompt']} prompt"
             + (f", {record['grader_independence']}" if record.get("self_graded") else "")
             + "; scores 0-100 against each question's gold rubric (not the run's generated rubrics)"]
    lines += per_question_table(record, width)
    if record["before_version"] == record["after_version"]:
        lines.append("the run shipped its initial skill: both columns are the same skill")
    elif record.get("after_same_as_before"):
        lines.append(f"{skill_file['path'] if skill_file else after} holds the run's v{record['before_version']:03d} "
                     "unchanged: both columns are the same skill")
    lines += ["both answers to each question side by side, with the grader's reasons:",
              f"  {shlex.join(['decoevo', 'report', str(run_dir)])}"]
    if record.get("self_graded"):
        roles = list(record.get("self_graded_roles") or [])
        played = ", ".join(roles[:2]) + (f" and {len(roles) - 2} other role(s)" if len(roles) > 2 else "")
        lines.append(f"the grader is the run's own model (it played {played}); for an independent result:")
        again = ["decoevo", "compare", str(run_dir), *(["--skill", skill_file["path"]] if skill_file else [])]
        lines.append(f"  {shlex.join(again)} --grader-model MODEL [--grader-base-url URL]")
    return lines


def _threshold(value: float | None) -> float | None:
    if value is not None and not math.isfinite(value):
        raise typer.BadParameter(f"{value}: give a score, a number like 60 on the benchmark's scale")
    return value


@guarded
def compare(
    run_dirs: list[Path] = RunDirs,
    split: str = typer.Option("test", help="The run's split to compare on."),
    skill: Path = typer.Option(None, "--skill", help="Compare the run's shipped skill with the skill in this "
                               "file (an edited prompt, e.g. what `export -o FILE` wrote) instead of the "
                               "initial one with the shipped one."),
    fail_under: float = typer.Option(None, "--fail-under", callback=_threshold, help="Exit 1 when the shipped "
                                     "(or --skill) skill's mean over the paired questions is under this score "
                                     "(0-100); the line names the questions under it."),
    fail_on_regression: bool = typer.Option(False, "--fail-on-regression", help="Exit 1 when any question "
                                            "scores lower with the shipped (or --skill) skill than with the "
                                            "other; the line names them. Either check also fails on a question "
                                            "not graded under both."),
    data: str = typer.Option(None, help="Compare on every question of this benchmark file instead of the "
                             "run's test split."),
    fmt: str = typer.Option(None, "--format", help="Format of --data (e.g. jsonl, healthbench, llmeval_med)."),
    benchmark: str = typer.Option(None, "--benchmark", help="Compare on a fetched public benchmark, NAME[:split]."),
    limit: int = typer.Option(None, min=1, help="With --data/--benchmark: only the first N questions (by id)."),
    grader_model: str = GraderModel,
    grader_base_url: str = GraderBaseUrl,
    grader_prompt: str = typer.Option("auto", help="auto: the benchmark's official grader prompt when fetched, "
                                      "else ours; official; ours."),
    force: bool = Force,
    concurrency: int = typer.Option(None, min=1, help="Questions compared at once (default: the run's)."),
    as_json: bool = JsonOption,
) -> None:
    """Your initial solver skill vs the shipped one, per question: both scores, Δ with a paired 95% CI.

    On the run's test split (or --data), graded by the gold grader; writes RUN/eval/compare-*.json.

    --skill FILE: the shipped skill vs an edited prompt. --fail-under, --fail-on-regression: exit 1 (CI).

    As a CI guard: `decoevo docs evaluation-files` (the workflow to copy is in it)."""
    from ..api import compare_async
    from ..evaluation.guard import check
    from .shipped import unfinished_warning

    refuse_empty(data=data, format=fmt, benchmark=benchmark, grader_model=grader_model,
                 grader_base_url=grader_base_url, split=split)
    if (data or benchmark) and split != "test":
        fail(f"--split {split} chooses one of the run's splits; --data/--benchmark compare on a file instead")
    grader = _grader_spec(grader_model, grader_base_url)
    if data and not fmt:
        fail("--data needs --format (the benchmark's format, e.g. jsonl, healthbench or llmeval_med)")
    if limit is not None and not (data or benchmark):
        fail(f"--limit {limit} applies to --data or --benchmark; the run's test split is compared whole")
    target = None
    if data or benchmark:
        try:
            path, path_fmt = choose_data(data, fmt, benchmark)
        except ConfigError as exc:
            fail(str(exc))
        target = {"path": path, "format": path_fmt or "jsonl", "limit": limit}
    width = min(current_width(console), 100)
    guard_failed: list[str] = []

    def job(run_dir: Path, tick: Any) -> tuple[str, bool, dict[str, Any]]:
        not_a_run = not_a_run_line(run_dir)
        if not_a_run:
            raise ConfigError(not_a_run)
        unfinished = unfinished_warning(run_dir, "this compares")
        if unfinished:
            warn(unfinished)
        r = asyncio.run(compare_async(run_dir, data=target, grader=grader, force=force, on_item=lambda _: tick(),
                                      grader_prompt=grader_prompt, concurrency=concurrency, split=split,
                                      skill_file=skill))
        before, after = side_names(r)
        verdict = check(r, fail_under=fail_under, fail_on_regression=fail_on_regression,
                        before=before, after=str(skill) if skill is not None else after)
        if fail_under is not None or fail_on_regression:
            r = {**r, "guard": verdict.to_dict()}
        if not as_json:  # the table and the commands as they are: a command is never wrapped, so it copies whole
            lines = summary_lines(run_dir, r, width)
            lines[0] = f"{run_dir}: {lines[0]}"
            for line in lines:
                console.print(printable(line), markup=False, highlight=False, soft_wrap=line.startswith("  decoevo "))
        if not verdict.passed:
            guard_failed.append(f"{run_dir}: {verdict.line()}")
        return _saved(r, r["n_paired"], f"written {r['file']}")

    _each_run(run_dirs, "comparing", job, as_json, count=questions_in(split, target))
    for line in guard_failed[:-1]:
        err_console.print(f"[bold red]error:[/] {escape(printable(line))}", highlight=False)
    if guard_failed:  # the comparison is written and shown; the guard's verdict is the exit code
        fail(guard_failed[-1], code=1)


def not_a_run_line(run_dir: Path) -> str | None:
    """One line for a folder that is no run directory (it would otherwise read as a run never finished)."""
    from ..rundir import RunReader

    if run_dir.is_dir() and RunReader(run_dir).exists():
        return None
    what = "no such folder" if not run_dir.exists() else "not a folder" if not run_dir.is_dir() else \
        "not a decoevo run directory (no config.yaml)"
    return f"{run_dir}: {what}; pass a run directory made by `decoevo run` (e.g. runs/NAME)"
