"""Grading results: raw per-item verdicts, the question's score, and the benchmark aggregate.

A criterion the grader could not score is kept with `value=None` and its failure category; it is
never counted as 0. Whether a question can still be scored from its other items is the scheme's
`UnknownPolicy` (documented in docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..lm.errors import FailureCategory, LMError


class ItemGrade(BaseModel):
    """One gold criterion's verdict. `value` is on the benchmark's own scale (met = 1 / not met = 0,
    1-10, 0-10, 1-5 or 0-20); None when the grader failed, with `error` saying how."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built when a grade is first made, not at import

    index: int
    criterion: str
    points: float = 1.0
    value: float | None
    rationale: str = ""
    error: FailureCategory | None = None
    error_message: str = ""

    @classmethod
    def failed(cls, index: int, criterion: str, points: float, exc: LMError) -> ItemGrade:
        return cls(index=index, criterion=criterion, points=points, value=None, error=exc.category,
                   error_message=str(exc)[:300])


class GradeResult(BaseModel):
    """One response graded under one question's gold rubric. `score` is 0-100, None when ungraded."""

    model_config = ConfigDict(frozen=True, defer_build=True)  # built when a grade is first made, not at import

    question_id: str
    scheme: str
    score: float | None
    items: tuple[ItemGrade, ...]
    ungraded_reason: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @property
    def graded(self) -> bool:
        return self.score is not None

    @property
    def unknown(self) -> int:
        return sum(1 for i in self.items if i.value is None)


@dataclass(frozen=True)
class UnknownPolicy:
    """`min_coverage=None`: every item must be scored. Otherwise the score uses the scored items when
    their share of the total weight is at least `min_coverage`."""

    min_coverage: float | None
    weighted: bool = False  # coverage by weight (points) instead of by count


def conclude(
    question_id: str, scheme: str, items: Sequence[ItemGrade], policy: UnknownPolicy,
    compute: Callable[[list[ItemGrade]], tuple[float | None, dict[str, Any]]],
) -> GradeResult:
    """Apply the unknown policy, then `compute(scored items) -> (score 0-100 or None, details)`."""
    scored = [i for i in items if i.value is not None]
    total = sum(abs(i.points) if policy.weighted else 1.0 for i in items)
    have = sum(abs(i.points) if policy.weighted else 1.0 for i in scored)
    coverage = have / total if total else 0.0
    base = {"coverage": coverage, "unknown": len(items) - len(scored)}

    def ungraded(reason: str) -> GradeResult:
        return GradeResult(question_id=question_id, scheme=scheme, score=None, items=tuple(items),
                           ungraded_reason=reason, details=base)

    if not scored:
        return ungraded("no criterion could be scored")
    if len(scored) < len(items):
        if policy.min_coverage is None:
            return ungraded(f"{len(items) - len(scored)} criterion(s) unscored and this rule needs all of them")
        if coverage < policy.min_coverage:
            return ungraded(f"only {coverage:.0%} of the rubric scored (needs {policy.min_coverage:.0%})")
    score, details = compute(scored)
    if score is None:
        return ungraded(details.get("reason", "the rule is undefined for this rubric"))
    return GradeResult(question_id=question_id, scheme=scheme, score=score, items=tuple(items),
                       details={**base, **details})


class BenchmarkScore(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)  # built when a grade is first made, not at import

    scheme: str
    score: float | None  # 0-100 over graded questions; None when nothing was graded
    n_graded: int
    n_ungraded: int
    details: dict[str, Any] = Field(default_factory=dict)


def aggregate(results: Sequence[GradeResult],
              summarise: Callable[[Sequence[GradeResult]], tuple[float, dict[str, Any]]]) -> BenchmarkScore:
    """The benchmark score over graded questions by the benchmark's own `summarise`; ungraded questions
    are counted, never scored 0."""
    schemes = {r.scheme for r in results}
    if len(schemes) != 1:
        raise ValueError(f"aggregate one scheme at a time, got {sorted(schemes) or 'none'}")
    scheme = schemes.pop()
    graded = [r for r in results if r.score is not None]
    n_ungraded = len(results) - len(graded)
    if not graded:
        return BenchmarkScore(scheme=scheme, score=None, n_graded=0, n_ungraded=n_ungraded)
    score, details = summarise(graded)
    return BenchmarkScore(scheme=scheme, score=score, n_graded=len(graded), n_ungraded=n_ungraded, details=details)
