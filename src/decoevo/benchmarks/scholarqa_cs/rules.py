"""ScholarQA-CS's score over the annotated criteria, as a pure function."""

from __future__ import annotations

from collections.abc import Sequence

from ...grading.rules import check_range


def scholarqa_score(scores: Sequence[float], weights: Sequence[float]) -> float:
    """Criteria scored 0-10, divided by 10, weighted by the annotated weights (normalised to sum 1), x100."""
    check_range(scores, 0, 10, "scholarqa_cs")
    if len(scores) != len(weights) or any(w <= 0 for w in weights):
        raise ValueError("scholarqa_cs: need one positive weight per score")
    return sum(s / 10 * w for s, w in zip(scores, weights, strict=True)) / sum(weights) * 100
