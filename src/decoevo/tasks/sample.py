"""A seeded, stratified sample of a benchmark's questions (`data.limit` with `data.sample_seed`).

The first N ids in string order are one category of LLMEval-Med (its ids start with the category) and a
block of whatever order a file happens to have; a subset has to keep the benchmark's mix. Strata are the
question's category as its loader records it (LLMEval-Med's category, EQ-Bench's, WritingBench's
domain); each gets its share of N by largest remainder, drawn by the seed. The unit drawn is a
conversation: a multi-turn question (LLMEval-Med's rounds of one groupCode) comes with its earlier rounds
or not at all, so no round is answered without the turns before it.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence

from ..domain import Question

STRATUM_KEYS = ("category_key", "category1", "category", "domain1")


def stratum(q: Question) -> str:
    for key in STRATUM_KEYS:
        value = q.meta.get(key)
        if isinstance(value, str) and value:
            return value
    return ""


def _unit(q: Question) -> str:
    group = q.meta.get("groupCode")
    return f"{stratum(q)}\x00{group}" if group is not None else f"\x01{q.id}"


def stratified_sample(questions: Sequence[Question], n: int, seed: int) -> list[Question]:
    """At most `n` questions: per stratum its share of `n` (largest remainder, ties by stratum name), each
    drawn by `seed` as whole conversations; returned in id order. The same questions, `n` and seed always
    give the same sample."""
    if n >= len(questions):
        return sorted(questions, key=lambda q: q.id)
    units: dict[str, list[Question]] = defaultdict(list)
    for q in questions:
        units[_unit(q)].append(q)
    by_stratum: dict[str, list[str]] = defaultdict(list)
    for key, members in units.items():
        by_stratum[stratum(members[0])].append(key)
    total = len(questions)
    sizes = {s: sum(len(units[k]) for k in keys) for s, keys in by_stratum.items()}
    quota = {s: n * size / total for s, size in sizes.items()}
    share = {s: int(q) for s, q in quota.items()}
    for s in sorted(quota, key=lambda s: (-(quota[s] - share[s]), s))[: n - sum(share.values())]:
        share[s] += 1
    rng = random.Random(seed)
    chosen: list[Question] = []
    for s in sorted(by_stratum):
        keys = sorted(by_stratum[s])
        rng.shuffle(keys)
        taken = 0
        for key in keys:  # whole conversations while they fit the stratum's share
            if taken + len(units[key]) <= share[s]:
                chosen += units[key]
                taken += len(units[key])
    return sorted(chosen, key=lambda q: q.id)
