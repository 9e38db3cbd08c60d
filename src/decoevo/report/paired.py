"""Scores of two methods' evaluation files on the questions graded in both.

A question the grader could not score for one method is left out of that method's score; comparing its
score with another method's, graded on a different set of questions, would compare different question
mixes. So a paired comparison rescores both files, by the benchmark's own summary rule, on the questions
both graded. No model calls: the per-question grades are in each file's `items`.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from pydantic import ValidationError

from ..analysis.stats import Coverage
from ..benchmarks import aggregate
from ..grading.result import GradeResult
from ..rundir.records import EvalFile


@dataclass(frozen=True)
class PairedScores:
    ours: float
    theirs: float
    questions: Coverage  # questions graded in both / questions of the split (the larger side's count)


@dataclass(frozen=True)
class CommonScores:
    scores: dict[str, float]  # per key (a method), its score on the common questions
    questions: Coverage  # questions graded in all / questions of the split (the largest file's count)


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
    # Every question graded and none ungraded: its own score, as written. With ungraded ones the file's score
    # may count them (LLMEval-Med's usability counts an unscored answer as not usable), and the other side of
    # the pair is scored on these questions alone, so this side is rescored on them too.
    if len(ids) == ev.n_graded and not ev.n_ungraded:
        return ev.score
    return aggregate([grades[i] for i in sorted(ids)]).score


def common_scores(files: Mapping[str, EvalFile]) -> CommonScores | None:
    """Every file scored on the questions graded in all of them (a headline column: each method on the
    same questions); None when no question was graded in all. Files without per-question grades are used
    whole, and only when every file graded every question."""
    if not files:
        return None
    total = max(f.n_graded + f.n_ungraded for f in files.values())
    grades = {k: _grades(f) for k, f in files.items()}
    if any(g is None for g in grades.values()):
        if any(f.score is None or f.n_ungraded for f in files.values()):
            return None
        return CommonScores({k: f.score for k, f in files.items() if f.score is not None},
                            Coverage(min(f.n_graded for f in files.values()), total))
    common = frozenset.intersection(*(frozenset(q for q, g in gs.items() if g.score is not None)
                                      for gs in grades.values() if gs is not None))
    if not common:
        return None
    out: dict[str, float] = {}
    for k, f in files.items():
        g = grades[k]
        score = _score_on(f, g, common) if g is not None else None
        if score is None:
            return None
        out[k] = score
    return CommonScores(out, Coverage(len(common), total))


def paired_scores(ours: EvalFile, theirs: EvalFile) -> PairedScores | None:
    """Both files scored on the questions graded in both (`common_scores` of two files)."""
    both = common_scores({"ours": ours, "theirs": theirs})
    if both is None:
        return None
    return PairedScores(both.scores["ours"], both.scores["theirs"], both.questions)
