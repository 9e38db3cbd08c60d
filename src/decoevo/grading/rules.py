"""Helpers shared by the benchmarks' scoring rules (each benchmark's formula lives in its own folder,
`decoevo/benchmarks/<name>/rules.py`). Inputs outside a rule's scale raise ValueError rather than being
clipped, because an out-of-range value means a bug upstream."""

from __future__ import annotations

import math
from collections.abc import Sequence


def check_range(values: Sequence[float], lo: float, hi: float, what: str) -> None:
    if not values:
        raise ValueError(f"{what}: no scores")
    for v in values:
        if not (lo <= v <= hi) or math.isnan(v):
            raise ValueError(f"{what}: score {v} outside [{lo}, {hi}]")


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)
