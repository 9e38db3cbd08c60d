"""Pair selection for the contrastive audit (eq. 6) and the random-pairs ablation."""

from __future__ import annotations

import random
from collections.abc import Sequence
from itertools import combinations

from ..thresholds import reaches


def select_near_tie_pairs(scores: Sequence[float], tau: float, max_pairs: int) -> list[tuple[int, int]]:
    """Pairs (i, j), i < j, with |z_i − z_j| ≤ τ_tie: smallest gaps first, at most H, and no rollout in
    two pairs, so one question with many ties cannot dominate the signal."""
    candidates = sorted(
        ((abs(scores[i] - scores[j]), i, j) for i, j in combinations(range(len(scores)), 2)
         if reaches(tau, abs(scores[i] - scores[j]))),
    )
    used: set[int] = set()
    chosen: list[tuple[int, int]] = []
    for _, i, j in candidates:
        if len(chosen) >= max_pairs:
            break
        if i in used or j in used:
            continue
        chosen.append((i, j))
        used.update((i, j))
    return chosen


def select_random_pairs(n: int, max_pairs: int, rng: random.Random) -> list[tuple[int, int]]:
    """The ablation without near-tie selection: disjoint random pairs, ignoring scores."""
    order = list(range(n))
    rng.shuffle(order)
    pairs = [tuple(sorted(order[k : k + 2])) for k in range(0, n - 1, 2)]
    return [(p[0], p[1]) for p in pairs[:max_pairs]]
