"""The expected paid calls of a running run, re-estimated after each inner step and outer round from what
the run has shown so far: the calls it paid, the share of its steps that kept the incumbent or never
reached the gate (an invalid rewrite, or no failure to learn from), the share of its generator rewrites
that were invalid, and what its outer rounds cost. The estimate before the run (engine/estimate.py) can
only assume these; a tiny model whose every rewrite loops pays no gate scoring, and a world whose blind
auditor never decides a pair pays no reveals, and neither is known until the run shows it.

Each measured share is the prior's value counted as `PRIOR_WEIGHT` observations plus the run's own
(a Beta-style mean), so one step moves it part of the way; the rounds still to come are the schedule's
expected rounds from the run's actual state (step, consecutive rejections, last round).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..lm import LMConfig
from ..methods import MethodSpec
from ..policies import should_audit
from ..tasks.splits import SplitSizes
from .batches import EXACT_STEPS, draws
from .config import Hyper
from .estimate import GENERATOR_ACCEPT, Rates, estimate_calls, expected_rounds
from .model_prior import model_prior

PRIOR_WEIGHT = 1.0  # the assumption weighs as much as one step's (one round's) outcome


@dataclass(frozen=True)
class Seen:
    """What a run has shown so far."""

    steps: int = 0  # inner steps ended (failed ones included)
    kept: int = 0  # of which the incumbent stayed: rejected, invalid, no candidate, failed
    ungated: int = 0  # of which the rewrite never reached the gate: invalid, no candidate, failed
    rounds: int = 0  # outer rounds ended
    invalid_generators: int = 0  # of which the generator rewrite was invalid (never verified)
    generator_accepts: int = 0  # of which the generator candidate was accepted
    round_calls: int = 0  # paid calls made in the ended rounds


def seen_rates(seen: Seen, prior: Rates | None = None, weight: float = PRIOR_WEIGHT) -> Rates:
    """The prior's shares moved toward the run's own (the generator's acceptance from the rule's prior,
    `GENERATOR_ACCEPT`, when the method's is given as `prior_for`)."""
    prior = prior or Rates()
    accept = prior.generator_accept

    def mix(p: float, k: int, n: int) -> float:
        return (weight * p + k) / (weight + n)

    return replace(prior, reject=mix(prior.reject, seen.kept, seen.steps),
                   ungated=mix(prior.ungated, seen.ungated, seen.steps),
                   generator_invalid=mix(prior.generator_invalid, seen.invalid_generators, seen.rounds),
                   generator_accept=None if accept is None or not seen.rounds else
                   mix(accept, seen.generator_accepts, seen.rounds))


def prior_for(method: MethodSpec, lm: LMConfig | None = None) -> Rates:
    """The rates assumed before a run of `method`, its generator's acceptance made explicit, with the
    embedded default's measured shares of unusable rewrites when it writes them (engine/model_prior.py)."""
    return model_prior(Rates(generator_accept=GENERATOR_ACCEPT.get(type(method.acceptance), 1.0)), lm)[0]


@dataclass(frozen=True)
class Position:
    """Where a run stands when it is re-estimated: the next inner step to start, the consecutive
    rejections and the step of the last round (−1: none) after the event, and whether an outer round
    follows the step that just ended."""

    next_step: int
    stalls: int = 0
    last_round_step: int = -1
    round_pending: bool = False

    @classmethod
    def after_step(cls, step: int, stalls: int, last_round_step: int, method: MethodSpec, hyper: Hyper,
                   ) -> Position:
        since_last = hyper.audit_schedule == "since_last_round"
        pending = method.runs_audits and should_audit(step, hyper.audit_every, stalls, hyper.max_stalls,
                                                      last_round=last_round_step if since_last else None)
        return cls(step + 1, 0 if pending else stalls, step if pending else last_round_step, pending)


def calls_ahead(method: MethodSpec, hyper: Hyper, sizes: SplitSizes, seed: int | None, seen: Seen,
                at: Position, prior: Rates | None = None) -> float:
    """Expected paid calls from `at` to the end of the run, at the rates `seen` implies (from `prior`,
    default `prior_for(method)`)."""
    rates = seen_rates(seen, prior or prior_for(method))
    est = estimate_calls(method, hyper, sizes, seed=seed, rates=rates)
    steps_left = max(est.steps - at.next_step, 0)
    ahead = est.inner_per_step * steps_left
    # rubrics of train questions no batch has drawn yet: from the run's draws, or (past EXACT_STEPS, so that
    # nothing here is sized by a configured step count) the chance a question was missed until now and not after
    if seed is not None and 0 < est.steps <= EXACT_STEPS:
        batches = draws(seed, est.steps, sizes.train, hyper.batch_size)
        ahead += len(frozenset().union(*batches[at.next_step:]) - frozenset().union(*batches[:at.next_step]))
    elif sizes.train:
        miss = 1 - min(hyper.batch_size, sizes.train) / sizes.train
        ahead += sizes.train * (miss ** min(at.next_step, est.steps) - miss ** est.steps)
    if seen.steps - seen.ungated == 0:  # no step has reached the gate yet: the incumbent's V_s scores
        ahead += 3 * sizes.solver_gate * (1 - rates.ungated ** steps_left)
    if not method.runs_audits:
        return ahead
    since = at.next_step - 1 - at.last_round_step
    rounds = at.round_pending + expected_rounds(est.steps, hyper.audit_every, hyper.max_stalls, rates.reject,
                                                hyper.audit_schedule, start=at.next_step, stalls=at.stalls,
                                                since=since)
    if rounds <= 0:
        return ahead
    # a round's cost: the prior's at the measured shares, moved toward what the ended rounds paid
    first = est.once_round if seen.rounds == 0 else 0.0  # the incumbent's V_g rubrics and audits
    paid = max(seen.round_calls - est.once_round, 0.0) if seen.rounds else 0.0
    per_round = (PRIOR_WEIGHT * est.outer_per_round + paid) / (PRIOR_WEIGHT + seen.rounds)
    return ahead + first + per_round * rounds
