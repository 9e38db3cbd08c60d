"""What the runs of one seed share through the request cache, for the projection of an experiment that runs
several methods on the same questions (`decoevo reproduce`, a sweep).

Runs of one seed on one benchmark draw the same splits and batches and start from the same skills, so as
long as two of them are in the same state (same incumbent solver, same incumbent generator) they send the
same requests, and only the first pays. From the structure of the loop:
- the start of a run (the incumbent's first gate scores, the rubrics of the questions it touches) is the same
  for every method whose generator skill is the initial one (Task-Prior's is not);
- every inner step is the same while the generator is the initial one and the solver rewriter sees no audit
  records: SkillOpt's trajectory, which DecoEvo and its ablations follow until a generator candidate is
  accepted (Direct Audit until its first round routes audit records to the solver; No-Verification until its
  first round, which accepts); Budget-Matched follows it for its first T steps;
- an outer round's probe (its rubrics, structural audits, rollouts and their judgements) is the same for
  every method on that trajectory; the blind comparisons also depend on the pair selection and on whether
  the auditor is blind; the rewrite and its candidate's verification are each method's own;
- an evaluation of a skill another run of the seed already evaluated is free: the zero-shot test answers
  are every run's whose solver skill never changed, and a run still on SkillOpt's trajectory at its end
  ends with SkillOpt's skills.
How often a generator candidate is accepted is not known before the run; the model assumes
`GENERATOR_ACCEPT`, as `REJECT_PROB` does for the solver's rewrites.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..methods import MethodSpec
from ..tasks.splits import SplitSizes
from .config import Hyper
from .estimate import (
    DECIDED_FRACTION,
    FIRST_ORDER_DECISIVE,
    GENERATOR_ACCEPT,
    REJECT_PROB,
    SETTLED_BY_STRUCTURAL,
    Shared,
    _outer_round,
    estimate_calls,
    expected_rounds,
    planned_steps,
)


def leaves_trajectory(method: MethodSpec) -> float:
    """Probability that one outer round takes a run off SkillOpt's trajectory (0: it never runs one)."""
    if not method.runs_audits:
        return 0.0
    if method.audit_to_solver:
        return 1.0  # the audit records enter the next solver rewrite
    return GENERATOR_ACCEPT.get(type(method.acceptance), 1.0)


@dataclass(frozen=True)
class RunShare:
    """One run's expected paid calls alone, and which of them another run of its seed may already have paid."""

    method: str
    alone: float  # expected paid calls of the run on its own (estimate_calls, or its paired run's if matched)
    family: str  # runs of one family start alike: the initial generator skill, or Task-Prior's
    start: Shared  # the start of the run (by role)
    step_calls: float  # expected paid calls of one inner step
    steps_on: float  # expected inner steps taken on SkillOpt's trajectory
    rounds_on: float  # expected outer rounds taken on it
    round_calls: Shared  # paid calls of one round, by what makes them equal
    once: Shared  # the incumbent's verification set, paid once per run, by what makes it equal
    on_at_end: float  # probability the run ends on the trajectory (its final skills are SkillOpt's)
    steps: int
    trials: float = 0.0  # expected rewrites that could be accepted: steps whose batch is new under the skill

    def shared_part(self) -> float:
        return (sum(self.start.values()) + self.step_calls * self.steps_on
                + sum(self.round_calls.values()) * self.rounds_on + sum(self.once.values()) * (self.rounds_on > 0))


def run_share(method: MethodSpec, hyper: Hyper, sizes: SplitSizes, alone: float | None = None,
              seed: int | None = None) -> RunShare:
    """The parts of a run of `method` that repeat its seed's other runs' requests while they agree."""
    est = estimate_calls(method, hyper, sizes, seed=seed)
    family = "task_prior" if method.task_prior else "initial"
    if not method.optimize_solver:
        return RunShare(method.name, 0.0, family, {}, 0, 0.0, 0.0, {}, {}, 1.0, 0, 0.0)
    steps = planned_steps(method, hyper)
    leave = leaves_trajectory(method)
    # P(on the trajectory at step s) = (1 - leave)^(rounds before s), with the expected rounds of the schedule
    before = [expected_rounds(s, hyper.audit_every, hyper.max_stalls, REJECT_PROB, hyper.audit_schedule)
              for s in range(steps + 1)]
    steps_on = sum((1 - leave) ** before[s] for s in range(steps)) if method.runs_audits else float(steps)
    start_calls = sum(est.by_role_once.values())
    on_at_end = 1.0
    if alone is not None and method.budget_matched and est.inner_per_step:
        # Budget-Matched stops at its paired run's usage: steps past SkillOpt's T are its own, and its final
        # skill is SkillOpt's only if every one of them was rejected
        steps_on = max(0.0, min(steps_on, (alone - start_calls) / est.inner_per_step))
        on_at_end = REJECT_PROB ** max(0.0, steps_on - hyper.steps)
    rounds = est.expected_rounds
    whole = int(rounds)
    rounds_on = sum((1 - leave) ** j for j in range(whole)) + (rounds - whole) * (1 - leave) ** whole
    round_calls: Shared = {}
    once: Shared = {}
    if method.runs_audits:
        _outer_round(method, hyper, sizes, DECIDED_FRACTION, FIRST_ORDER_DECISIVE, SETTLED_BY_STRUCTURAL,
                     (round_calls, once))
    start: Shared = {("start", role): n for role, n in est.by_role_once.items()}
    for (role, *_), n in once.items():  # the incumbent's V_g is in by_role_once too: count it once
        start[("start", role)] -= n
    return RunShare(method.name, float(est.expected if alone is None else alone), family, start,
                    est.inner_per_step, steps_on, rounds_on, round_calls, once,
                    (1 - leave) ** rounds if method.runs_audits else on_at_end, steps,
                    est.by_role_step.get("rewrite_solver", 0.0) * steps)


def seed_training(shares: Sequence[RunShare]) -> dict[str, float]:
    """Expected paid training calls of each run when the runs of one seed and benchmark share one request
    cache: the shared parts are paid once per family (the most any run needs of them), in the given order."""
    paid_shared: dict[tuple[str, ...], float] = {}
    out: dict[str, float] = {}
    for share in shares:
        own = share.alone - share.shared_part()
        parts: dict[tuple[str, ...], float] = {}
        for key, n in share.start.items():
            parts[(share.family, *key)] = float(n)
        parts[(share.family, "steps")] = share.step_calls * share.steps_on
        for key, n in share.round_calls.items():
            parts[(share.family, "round", *key)] = n * share.rounds_on
        for key, n in share.once.items():
            parts[(share.family, "once", *key)] = float(n) * (share.rounds_on > 0)
        new = 0.0
        for key, part in parts.items():
            have = paid_shared.get(key, 0.0)
            if part > have:
                new += part - have
                paid_shared[key] = part
        out[share.method] = max(0.0, own) + new
    return out


def distinct_evaluations(shares: Sequence[RunShare]) -> dict[str, float]:
    """Expected share of each run's evaluation that is new among the runs of its seed (1: all paid, 0: all
    answered by the cache): its final solver skill is new unless it is the initial one (a run whose every
    rewrite was rejected: REJECT_PROB per step) or SkillOpt's trajectory's end, already evaluated."""
    initial_paid = False
    trajectory_paid: dict[str, float] = {}  # probability the trajectory's end is evaluated already, per family
    out: dict[str, float] = {}
    for share in shares:
        if share.steps == 0:
            out[share.method] = 0.0 if initial_paid else 1.0
            initial_paid = True
            continue
        # some rewrite was accepted; a batch drawn again under the same skill is the same rewrite, rejected again
        changed = 1 - REJECT_PROB ** share.trials if initial_paid else 1.0
        paid = trajectory_paid.get(share.family, 0.0)
        on = share.on_at_end
        out[share.method] = changed * (on * (1 - paid) + (1 - on))
        trajectory_paid[share.family] = paid + (1 - paid) * on
    return out


def distinct_generators(shares: Sequence[RunShare]) -> dict[str, float]:
    """Expected share of each run's alignment (its final generator's rubrics, their matching) that is new: a
    run whose generator never changed (SkillOpt's; a co-evolving run with every candidate rejected) aligns
    the initial generator, which the first such run of the seed paid for."""
    paid = 0.0
    out: dict[str, float] = {}
    for share in shares:
        initial = share.on_at_end if share.method != "direct_audit" else 1.0
        out[share.method] = initial * (1 - paid) + (1 - initial)
        paid += (1 - paid) * initial
    return out


def distinct_checkpoints(shares: Sequence[RunShare]) -> dict[str, float]:
    """Expected share of each run's dynamics (every checkpoint re-graded) that is new: checkpoints taken on
    SkillOpt's trajectory are the same in every run still on it."""
    paid = 0.0
    out: dict[str, float] = {}
    for share in shares:
        on = share.steps_on / share.steps if share.steps else 1.0
        out[share.method] = 1 - min(on, paid)
        paid = max(paid, on)
    return out
