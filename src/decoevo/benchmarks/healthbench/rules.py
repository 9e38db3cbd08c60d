"""HealthBench's official score, as pure functions (numbers in, a number out)."""

from __future__ import annotations

import math
from collections.abc import Sequence

from ...grading.rules import mean


def healthbench_fraction(points: Sequence[float], met: Sequence[bool]) -> float | None:
    """One conversation: sum of the points of met items / sum of the positive points.

    A negative-point item is "met" when the response shows the bad behaviour, so it subtracts. The
    result is not clipped (it can be negative); clipping applies to the benchmark mean. None when the
    rubric has no positive points (the ratio is undefined)."""
    if len(points) != len(met):
        raise ValueError("healthbench: points and met differ in length")
    possible = sum(p for p in points if p > 0)
    if possible <= 0 or not math.isfinite(possible):  # points beyond float range: no ratio, never NaN
        return None
    fraction = sum(p for p, m in zip(points, met, strict=True) if m) / possible
    return fraction if math.isfinite(fraction) else None


def healthbench_aggregate(fractions: Sequence[float]) -> float:
    """The benchmark score x100: the mean over conversations clipped to [0, 1]. The mean is clipped, not
    each conversation, so a conversation below 0 still pulls the mean down."""
    if not fractions:
        raise ValueError("healthbench: no conversations")
    return min(1.0, max(0.0, mean(fractions))) * 100
