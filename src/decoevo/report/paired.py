"""Scores of two methods' evaluation files on the questions graded in both.

A question the grader could not score for one method is left out of that method's score; comparing its
score with another method's, graded on a different set of questions, would compare different question
mixes. So a paired comparison rescores both files, by the benchmark's own summary rule, on the questions
both graded. No model calls: the per-question grades are in each file's `items`.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from pydantic import ValidationError

from ..analysis.stats import Coverage, graded_in_both
from ..benchmarks import aggregate
from ..grading.result import GradeResult
from ..rundir.records import EvalFile


@dataclass(frozen=True)
class PairedScores:
    ours: float
    theirs: float
    questions: Coverage  # questions graded in both / questions of the split (the larger side's count)


def coverage(ev: EvalFile) -> Coverage:
    return Coverage(ev.n_graded, ev.n_graded + ev.n_ungraded)


def _grades(ev: EvalFile) -> dict[str, GradeResult] | None:
    """Per question id, its grade; None when the file does not list every question (then it cannot be
    rescored on a subset, only used whole)."""
    out: dict[str, GradeResult] = {}
    for item in ev.items:
        try:
            grade = GradeResult.model_validate(item["grade"])
        except (KeyError, TypeError, ValidationError):
            return None
        out[grade.question_id] = grade
    return out if len(out) == ev.n_graded + ev.n_ungraded else None


def _score_on(ev: EvalFile, grades: dict[str, GradeResult], ids: Collection[str]) -> float | None:
    if len(ids) == ev.n_graded:  # every question this file graded: its own score, as written
        return ev.score
    return aggregate([grades[i] for i in sorted(ids)]).score


def paired_scores(ours: EvalFile, theirs: EvalFile) -> PairedScores | None:
    """Both files scored on the questions graded in both; None when no question was graded in both.
    Files without per-question grades are compared whole, and only when both graded every question."""
    total = max(ours.n_graded + ours.n_ungraded, theirs.n_graded + theirs.n_ungraded)
    a, b = _grades(ours), _grades(theirs)
    if a is None or b is None:
        if ours.score is None or theirs.score is None or ours.n_ungraded or theirs.n_ungraded:
            return None
        return PairedScores(ours.score, theirs.score, Coverage(min(ours.n_graded, theirs.n_graded), total))
    common = graded_in_both({k: g.score for k, g in a.items()}, {k: g.score for k, g in b.items()})
    if not common:
        return None
    mine, other = _score_on(ours, a, common), _score_on(theirs, b, common)
    if mine is None or other is None:
        return None
    return PairedScores(mine, other, Coverage(len(common), total))
