"""A comparison as a regression guard (`decoevo compare --fail-under X --fail-on-regression`): the questions
that fail it, so CI can stop a merge on a changed prompt and say which questions it broke. Pure: a
comparison record in, what failed out.

The guard fails closed: a question that could not be graded under both skills is one it cannot vouch for,
so it fails the guard too (named as such), rather than passing unseen."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

SHOWN = 5  # questions named in the one line; the rest counted (the compare file lists them all)


@dataclass(frozen=True)
class GuardResult:
    failures: tuple[str, ...]  # one clause per failed check; empty: the guard passed

    @property
    def passed(self) -> bool:
        return not self.failures

    def line(self) -> str:
        return "regression guard failed: " + "; ".join(self.failures)

    def to_dict(self) -> dict[str, Any]:
        return {"passed": self.passed, "failures": list(self.failures)}


def _named(parts: Sequence[str]) -> str:
    more = f" and {len(parts) - SHOWN} more" if len(parts) > SHOWN else ""
    return ", ".join(parts[:SHOWN]) + more


def _score(x: float) -> str:
    return f"{x:.1f}"


def check(record: Mapping[str, Any], *, fail_under: float | None = None, fail_on_regression: bool = False,
          before: str = "before", after: str = "after") -> GuardResult:
    """The guard's verdict on a comparison record (CompareFile's fields): `fail_under` fails when the after
    side's mean over the paired questions is below it (naming the questions under it); `fail_on_regression`
    when any paired question scored lower after than before (naming them with both scores). Either check
    fails on a question not graded under both skills. `before`/`after` name the two sides in the line."""
    if fail_under is None and not fail_on_regression:
        return GuardResult(())
    rows = list(record.get("rows") or [])
    failures: list[str] = []
    unpaired = [str(r["question_id"]) for r in rows
                if r["before"].get("score") is None or r["after"].get("score") is None]
    if unpaired:
        failures.append(f"{len(unpaired)} question(s) not graded under both skills, so not checked "
                        f"({_named(unpaired)})")
    if fail_on_regression:
        lower = [r for r in rows if r.get("delta") is not None and r["delta"] < 0]
        if lower:
            failures.append(f"{len(lower)} question(s) scored lower with {after} than with {before} ("
                            + _named([f"{r['question_id']} {_score(r['before']['score'])}→"
                                      f"{_score(r['after']['score'])}" for r in lower]) + ")")
    if fail_under is not None:
        mean = record.get("after_score")
        if mean is None:
            failures.append(f"{after} has no mean to hold to --fail-under {fail_under:g} (nothing graded under "
                            "both skills)")
        elif mean < fail_under:
            under = [f"{r['question_id']} {_score(r['after']['score'])}" for r in rows
                     if r["after"].get("score") is not None and r["after"]["score"] < fail_under]
            failures.append(f"{after} scores {_score(mean)} (mean over {record.get('n_paired')} paired question(s)), "
                            f"under --fail-under {fail_under:g}" + (f"; under it: {_named(under)}" if under else ""))
    return GuardResult(tuple(failures))
