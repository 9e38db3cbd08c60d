"""Reply-length distributions for the simulated server (`decoevo.testing.sim_model`): draws from the
quantile tables of `decoevo.reply_lengths` (HealthBench's answers and rubrics, measured; assumed lengths for
the roles with no public reference text)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from ..reply_lengths import ANSWER_CHARS, ASSUMED_CHARS, CHARS_PER_TOKEN, CRITERION_CHARS, RUBRIC_CRITERIA

__all__ = ["ANSWER_CHARS", "ASSUMED_CHARS", "CHARS_PER_TOKEN", "CRITERION_CHARS", "RUBRIC_CRITERIA",
           "assumed_table", "draw_quantile"]


def draw_quantile(table: Sequence[float], rng: random.Random) -> float:
    """A draw from the distribution a percentile table describes (inverse CDF, linear between the
    tabulated percentiles)."""
    position = rng.random() * (len(table) - 1)
    k = min(int(position), len(table) - 2)
    return table[k] + (table[k + 1] - table[k]) * (position - k)


def assumed_table(field: str) -> tuple[float, ...]:
    """A 21-point percentile table through the assumed (p5, p50, p95) of a field, flat-tailed."""
    p5, p50, p95 = ASSUMED_CHARS.get(field, ASSUMED_CHARS["default"])
    low = [p5 + (p50 - p5) * i / 9 for i in range(10)]  # percentiles 5..50
    high = [p50 + (p95 - p50) * i / 9 for i in range(1, 10)]  # percentiles 55..95
    return (p5 * 0.8, *low, *high, p95 * 1.2)
