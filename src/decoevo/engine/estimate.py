"""An upper bound on the model calls a run will make, printed before it starts."""

from __future__ import annotations

from dataclasses import dataclass

from ..methods import MethodSpec
from ..policies import VerifyByAudits, VerifyBySolverScore
from ..tasks.splits import SplitSizes
from .config import Hyper


@dataclass(frozen=True)
class CallEstimate:
    inner_per_step: int
    outer_per_round: int
    steps: int
    scheduled_rounds: int  # every K steps
    max_rounds: int  # if stalls trigger the outer loop at every step

    @property
    def expected(self) -> int:
        return self.inner_per_step * self.steps + self.outer_per_round * self.scheduled_rounds

    @property
    def upper_bound(self) -> int:
        return self.inner_per_step * self.steps + self.outer_per_round * self.max_rounds



def planned_steps(method: MethodSpec, hyper: Hyper) -> int:
    """The inner steps a run of `method` takes: T, or up to `budget_step_cap` × T for Budget-Matched
    (which stops on its budget), or none for a method that does not optimize the solver."""
    if not method.optimize_solver:
        return 0
    return hyper.steps * (hyper.budget_step_cap if method.budget_matched else 1)

def estimate_calls(method: MethodSpec, hyper: Hyper, sizes: SplitSizes) -> CallEstimate:
    """Counts requests before caching, one call per judge request in joint mode; repairs not included."""
    if not method.optimize_solver:
        return CallEstimate(0, 0, 0, 0, 0)
    b, vs, vg, p = hyper.batch_size, sizes.solver_gate, sizes.generator_gate, sizes.probe
    L, H = hyper.rollouts, hyper.pairs_per_question
    inner = 3 * b + 1 + 2 * vs + vs + 2 * vs  # batch; rewrite; gate (both skills' answers, rubrics, judges)
    outer = 0
    if method.runs_audits:
        pairs = min(H, L // 2)
        if method.structural_audit:
            outer += 2 * p  # rubric + audit per probe question
        if method.contrastive_audit:
            outer += p * (2 * L + pairs * 3)  # rollouts, judges, two blind orders + reveal per pair
        if method.evolve_generator:
            outer += 1
            if isinstance(method.acceptance, VerifyByAudits):
                if method.structural_audit:
                    outer += 2 * 2 * vg
                if method.contrastive_audit:
                    outer += vg * (2 * L + 2 * pairs) + 2 * (vg + 2 * vg * pairs)
            elif isinstance(method.acceptance, VerifyBySolverScore):
                outer += 2 * 3 * vg
    steps = planned_steps(method, hyper)
    if not method.runs_audits:
        return CallEstimate(inner, 0, steps, 0, 0)
    return CallEstimate(inner, outer, steps, steps // hyper.audit_every, steps)
