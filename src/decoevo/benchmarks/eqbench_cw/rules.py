"""EQ-Bench Creative Writing v3's piece score, as a pure function."""

from __future__ import annotations

from collections.abc import Sequence

from ...grading.rules import check_range, mean


def eqbench_score(scores: Sequence[float], negative: Sequence[bool]) -> float:
    """Criteria scored 0-20; negative criteria (flaws) count as 20 - x; piece score = mean, x5."""
    check_range(scores, 0, 20, "eqbench_cw")
    if len(scores) != len(negative):
        raise ValueError("eqbench_cw: scores and negative flags differ in length")
    return mean([20 - s if neg else s for s, neg in zip(scores, negative, strict=True)]) * 5
