"""The commands the report suggests for what it could not show, each one made to work on the runs it is
shown for: `eval` only for runs that hold out a test split, `dynamics` on the diagnostic split or else the
test split, `align` only where the test questions have gold rubrics, with the runs' own paths filled in."""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # runs.py asks `has_test_gold` while reading a run
    from .runs import RunRecord


@dataclass(frozen=True)
class Step:
    """What to do for a group of runs: a command that works on each of them, or why there is none."""

    command: str | None
    note: str  # what the command does differently, or why no command can compute this
    runs: tuple[RunRecord, ...]


def _split_size(run: RunRecord, name: str) -> int:
    return len(run.split_ids.get(name, ())) if run.split_ids is not None else 0


def _one(kind: str, run: RunRecord) -> tuple[str | None, tuple[str, ...], str]:
    """(subcommand, its flags, note) for `kind` on one run; no subcommand when none would work."""
    if run.split_ids is None:
        return None, (), "its splits.json is unreadable, so no split can be graded"
    test = _split_size(run, "test")
    if kind == "eval":
        if test:
            return "eval", (), ""
        return (
            None,
            (),
            (
                "it holds out no test split (splits.test was 0); `decoevo eval --help` shows how to "
                "grade it on another benchmark file instead"
            ),
        )
    if kind == "dynamics":
        if _split_size(run, "diagnostic"):
            return "dynamics", (), ""
        if test:
            return (
                "dynamics",
                ("--split", "test"),
                ("it holds out no diagnostic split, so its checkpoints are scored on its test split"),
            )
        return None, (), "it holds out neither a diagnostic nor a test split to score its checkpoints on"
    if kind == "align":
        if not test:
            return None, (), "it holds out no test split whose rubrics could be compared"
        if run.test_gold is False:
            return None, (), "its test questions have no gold rubric to compare the generated rubrics with"
        return "align", (), ""
    raise ValueError(f"unknown kind {kind!r}")


def next_steps(kind: str, runs: Iterable[RunRecord]) -> tuple[Step, ...]:
    """The runs grouped by what works for them; one command names every run of its group."""
    groups: dict[tuple[str | None, tuple[str, ...], str], list[RunRecord]] = {}
    for run in runs:
        groups.setdefault(_one(kind, run), []).append(run)
    out = []
    for (sub, flags, note), members in groups.items():
        command = None
        if sub is not None:
            command = shlex.join(["decoevo", sub, *(str(r.path) for r in members), *flags])
        out.append(Step(command, note, tuple(members)))
    return tuple(sorted(out, key=lambda s: s.command is None))


def resume_command(path: Path) -> str:
    return shlex.join(["decoevo", "resume", str(path)])


def has_test_gold(data: Mapping[str, Any], split_ids: Mapping[str, Sequence[str]] | None) -> bool | None:
    """Whether any test question of the run has a gold rubric; None when the data file cannot be read
    from here (the commands would say so themselves)."""
    if split_ids is None or not split_ids.get("test"):
        return None
    path = Path(str(data.get("path") or ""))
    try:
        stat = path.stat()
    except OSError:
        return None
    gold = _gold_ids(
        str(path),
        str(data.get("format") or "jsonl"),
        data.get("task"),
        data.get("limit"),
        stat.st_mtime_ns,
        stat.st_size,
    )
    return None if gold is None else bool(gold.intersection(split_ids["test"]))


@lru_cache(maxsize=8)  # a sweep's runs share a few data files: each is read once
def _gold_ids(path: str, fmt: str, task: Any, limit: Any, _mtime: int, _size: int) -> frozenset[str] | None:
    from ..tasks.load import DataConfig, load_questions

    try:
        questions = load_questions(DataConfig(path=path, format=fmt, task=task, limit=limit))
    except Exception:  # only a hint: when unknown, the command is shown and names the problem itself
        return None
    return frozenset(q.id for q in questions if q.gold is not None and q.gold.items)
