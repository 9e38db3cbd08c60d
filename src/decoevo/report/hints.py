"""The commands the report suggests for what it could not show, each one made to work on the runs it is
shown for: `eval` only for runs that hold out a test split, `dynamics` on the diagnostic split or else the
test split, `align` only where the test questions have gold rubrics, with the runs' own paths filled in."""

from __future__ import annotations

import shlex
from collections.abc import Iterable
from dataclasses import dataclass

from .run_record import RunRecord


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
