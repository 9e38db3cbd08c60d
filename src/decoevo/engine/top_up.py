"""Topping a run up to its budget past the T scheduled steps (Budget-Matched, `budget.top_up`).

Past T, the batch draws repeat (a small train split has few distinct batches) and, while the solver is
unchanged, a step would replay the same requests: all cache hits that spend nothing, so the run reached
its step cap short of the paired run's tokens (Budget-Matched at 0.44× DecoEvo's in a simulated seed).
Each step past T therefore asks for a fresh rewrite sample, and a step that spent nothing does not count
toward the cap; a hard bound on all steps taken keeps a run that can never spend its budget finite.
"""

from __future__ import annotations

# All steps, spent or not, are at most this many times the counted-step cap (`budget_step_cap` × T).
HARD_BOUND_FACTOR = 2


def rewrite_sample_index(step: int, steps: int) -> int:
    """The solver rewrite's sample index at `step` of a run with T = `steps`: 0 within the schedule (the
    requests every method shares through the cache), then a fresh index per step past it."""
    return 0 if step < steps else step - steps + 1


def more_steps(taken: int, idle: int, planned: int, *, topped_up: bool) -> bool:
    """Whether a run that took `taken` steps, `idle` of which spent nothing, takes another. A plain run takes
    its `planned` T steps; a topped-up run up to `planned` steps that spent something (it normally stops on
    its budget first), and never more than HARD_BOUND_FACTOR × `planned` steps in all."""
    if not topped_up:
        return taken < planned
    return taken - idle < planned and taken < HARD_BOUND_FACTOR * planned
