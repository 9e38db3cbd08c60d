"""Which inner steps repeat an earlier step's requests, from the run's own batch draws.

An inner step draws its batch with the run's seeded generator (`EngineContext.rng("batch", step)`), so
every batch a run will draw is known before it starts: the same for every method of a seed. A batch
question already answered under the current solver skill is answered by the cache, and a whole batch
drawn again under it repeats the rewrite, so its candidate and the candidate's gate scores are cached too.
Whether the skill is still the one of an earlier step is not known before the run: it stood k steps with
probability r^k (1 − r), r the rewrite's rejection probability (`REJECT_PROB`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

EXACT_STEPS = 1024  # steps whose draws are followed; past them the estimate's closed form applies
NEGLIGIBLE = 1e-9  # a skill standing this unlikely long is not followed further back


@dataclass(frozen=True)
class Repeats:
    fresh: float  # mean batch questions per step not yet answered under the current skill
    new_batch: float  # mean share of steps whose whole batch is new under the current skill
    touched: int  # train questions drawn in some batch (each gets a rubric once)


def draws(seed: int, steps: int, train: int, batch: int) -> list[frozenset[int]]:
    """The batch (positions in the train split) of each step, as `inner_step` draws it."""
    k = min(batch, train)
    return [frozenset(random.Random(f"{seed}:batch:{step}").sample(range(train), k)) for step in range(steps)]


def repeats(seed: int, steps: int, train: int, batch: int, reject_prob: float,
            scheduled: int | None = None) -> Repeats | None:
    """The run's expected repeats, from its draws; None past `EXACT_STEPS` steps (or with no steps). Steps
    from `scheduled` (T) on ask for a fresh rewrite sample (engine/top_up.py): their rewrite is never a
    repeat, though their batch questions still are."""
    if steps <= 0 or steps > EXACT_STEPS or train <= 0:
        return None
    drawn = draws(seed, steps, train, batch)
    fresh = new = 0.0
    for s, current in enumerate(drawn):
        seen: set[int] = set()
        again = False  # the same batch drawn in the window
        stood = 1.0  # P(the skill stood at least k earlier steps)
        for k in range(s + 1):
            # the skill has stood exactly k steps: with the window's draws s-k..s-1 answered under it
            p = stood * (1 - reject_prob) if k < s else stood
            fresh += p * len(current - seen)
            new += p * (not again or (scheduled is not None and s >= scheduled))
            if k == s:
                break
            earlier = drawn[s - 1 - k]
            seen |= earlier
            again = again or earlier == current
            stood *= reject_prob
            if stood < NEGLIGIBLE:
                break
    return Repeats(fresh / steps, new / steps, len(frozenset().union(*drawn)))
