"""The official scoring rules, as pure functions: numbers in, a number out, on a 0-100 scale.

The formulas follow /shared/data/README.md ("Record shapes"); inputs outside a rule's scale raise
ValueError rather than being clipped, because an out-of-range value means a bug upstream.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def _check(values: Sequence[float], lo: float, hi: float, what: str) -> None:
    if not values:
        raise ValueError(f"{what}: no scores")
    for v in values:
        if not (lo <= v <= hi) or math.isnan(v):
            raise ValueError(f"{what}: score {v} outside [{lo}, {hi}]")


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def healthbench_fraction(points: Sequence[float], met: Sequence[bool]) -> float | None:
    """One conversation: sum of the points of met items / sum of the positive points.

    A negative-point item is "met" when the response shows the bad behaviour, so it subtracts. The
    result is not clipped (it can be negative); clipping applies to the benchmark mean. None when the
    rubric has no positive points (the ratio is undefined)."""
    if len(points) != len(met):
        raise ValueError("healthbench: points and met differ in length")
    possible = sum(p for p in points if p > 0)
    if possible <= 0:
        return None
    return sum(p for p, m in zip(points, met, strict=True) if m) / possible


def healthbench_aggregate(fractions: Sequence[float]) -> float:
    """The benchmark score x100. The data README says "the benchmark score is the mean over
    conversations clipped to [0, 1]": the mean is clipped, not each conversation, so a conversation
    below 0 still pulls the mean down."""
    if not fractions:
        raise ValueError("healthbench: no conversations")
    return min(1.0, max(0.0, mean(fractions))) * 100


def writingbench_score(scores: Sequence[float]) -> float:
    """Criteria scored 1-10; a query's score is their mean, x10 (so the floor is 10, not 0)."""
    _check(scores, 1, 10, "writingbench")
    return mean(scores) * 10


def scholarqa_score(scores: Sequence[float], weights: Sequence[float]) -> float:
    """Criteria scored 0-10, divided by 10, weighted by the annotated weights (normalised to sum 1), x100."""
    _check(scores, 0, 10, "scholarqa_cs")
    if len(scores) != len(weights) or any(w <= 0 for w in weights):
        raise ValueError("scholarqa_cs: need one positive weight per score")
    return sum(s / 10 * w for s, w in zip(scores, weights, strict=True)) / sum(weights) * 100


def researchqa_score(labels: Sequence[float]) -> float:
    """Coverage labels 1-5 per rubric item; score = mean of (label - 1) / 4, x100."""
    _check(labels, 1, 5, "researchqa")
    return mean([(x - 1) / 4 for x in labels]) * 100


def llmeval_med_score(score: float) -> float:
    """One 1-5 score per answer, mapped linearly: 1 -> 0, 5 -> 100."""
    _check([score], 1, 5, "llmeval_med")
    return (score - 1) / 4 * 100


def llmeval_med_usable(score: float) -> bool:
    """The benchmark calls an answer usable when it scores 4 or more."""
    _check([score], 1, 5, "llmeval_med")
    return score >= 4


def eqbench_score(scores: Sequence[float], negative: Sequence[bool]) -> float:
    """Criteria scored 0-20; negative criteria (flaws) count as 20 - x; piece score = mean, x5."""
    _check(scores, 0, 20, "eqbench_cw")
    if len(scores) != len(negative):
        raise ValueError("eqbench_cw: scores and negative flags differ in length")
    return mean([20 - s if neg else s for s, neg in zip(scores, negative, strict=True)]) * 5
