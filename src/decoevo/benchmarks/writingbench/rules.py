"""WritingBench's official score, as a pure function."""

from __future__ import annotations

from collections.abc import Sequence

from ...grading.rules import check_range, mean


def writingbench_score(scores: Sequence[float]) -> float:
    """Criteria scored 1-10; a query's score is their mean, x10 (so the floor is 10, not 0)."""
    check_range(scores, 1, 10, "writingbench")
    return mean(scores) * 10
