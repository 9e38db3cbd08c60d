"""ResearchQA's official score, as a pure function."""

from __future__ import annotations

from collections.abc import Sequence

from ...grading.rules import check_range, mean


def researchqa_score(labels: Sequence[float]) -> float:
    """Coverage labels 1-5 per rubric item; score = mean of (label - 1) / 4, x100."""
    check_range(labels, 1, 5, "researchqa")
    return mean([(x - 1) / 4 for x in labels]) * 100
