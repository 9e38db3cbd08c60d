"""The co-evolution budget (`Hyper.generator_share`, docs/cost.md): the generator's side of a run (its outer
rounds: audits, rewrite, verification) gets a token allowance that is a share of what the solver loop spends.

The allowance is the share times the solver loop's spend so far, projected to the run's planned steps (the
generator's work serves every later solver step, so it is budgeted against the whole loop, not the steps
done). A round starts only while the generator's side has spent less than that; inside a round the blind
audits take their questions a chunk at a time and stop once it has spent it all (the structural audits,
the rewrite and the verification of a started round always run, so a round can overrun by those).

Decoupling: every input is a token count from the ledger. Nothing here reads a score, so the generator's
acceptance still never sees the solver's aggregate score; the budget decides only how much auditing is
bought, never what a verdict is.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Spend:
    """Tokens paid so far (effective: inherited cache answers count, as budgets do), split by side."""

    total: int  # the whole run
    generator: int  # inside outer rounds
    steps_done: int  # inner steps completed (the loop's spend is projected from them)

    @property
    def solver(self) -> int:
        return max(0, self.total - self.generator)


@dataclass(frozen=True)
class CoevolutionBudget:
    """`share` of the solver loop's projected spend for the generator's side (0: no budget, the paper)."""

    share: float = 0.0
    planned_steps: int = 0

    @property
    def on(self) -> bool:
        return self.share > 0

    def allowance(self, spend: Spend) -> float:
        """The generator side's allowance now: share × the solver loop's spend projected to the planned steps."""
        if not self.on:
            return math.inf
        per_step = spend.solver / max(1, spend.steps_done)
        return self.share * per_step * max(self.planned_steps, spend.steps_done)

    def left(self, spend: Spend) -> float:
        return self.allowance(spend) - spend.generator

    def may_start_round(self, spend: Spend) -> bool:
        """A round starts only while the generator's side has allowance left."""
        return self.left(spend) > 0

    def may_continue(self, spend: Spend) -> bool:
        """A blind audit takes its next chunk of questions only while allowance is left."""
        return self.left(spend) > 0
