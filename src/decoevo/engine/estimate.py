"""What a run is expected to cost, printed before it starts: paid calls, cached answers and, when the
models are priced, dollars.

Paid calls are counted per role from the split sizes and hyperparameters, with what the cache answers
taken out (the incumbent's gate scores, its rubrics and structural audits while the generator is
unchanged, the margins of frozen pairs under the incumbent). How many outer rounds run depends on how
often the solver gate rejects, which is not known before the run: the estimate assumes each rewrite is
rejected with probability `REJECT_PROB` and counts the expected rounds of that schedule exactly, and
that a fraction `DECIDED_FRACTION` of near-tie pairs survives the blind audit. The high estimate is a
bound, not another expectation: the most rounds the schedule allows (every rewrite rejected), every pair
decided, and each step at its dearest (every batch question answered afresh and every rewrite gated, as
when every rewrite is accepted: nothing is left for the cache), over the most steps that can pay, which
for a run topped up to its budget (`budget.top_up`) is `budget_step_cap` × T, not T (engine/top_up.py).
With the decision short cuts (`hyper.decision_shortcuts`, the default), a blind comparison's second order
is asked for a share `FIRST_ORDER_DECISIVE` of pairs, and V_g's frozen set is drawn in a share
1 − `SETTLED_BY_STRUCTURAL` of verifications; the high estimate assumes every first order decisive and no
verification settled by the structural objective.
A rewrite that never reaches its gate (an invalid candidate, or a batch with no failure to learn from) pays
no gate scoring, and an invalid generator candidate no verification: shares `Rates.ungated` and
`Rates.generator_invalid`: not assumed before the run (0: nothing known says how often a model writes a
non-skill), except for the embedded default, whose shares were measured (engine/model_prior.py), and
updated from what the run has shown after each step and round (engine/reestimate.py), which is what the
progress line's "calls N/~M" shows.
Dollars use the expected tokens per call of each role at the run's sizes (engine/tokens.py), or those a
previous run measured.
The cost options of `Hyper` (reuse, early stop) are not modelled: with them on, a run pays less.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from math import comb

from ..methods import MethodSpec
from ..policies import AcceptEveryCandidate, VerifyByAudits, VerifyBySolverScore, should_audit
from ..tasks.splits import SplitSizes
from .batches import repeats
from .config import Hyper
from .tokens import CallTokens
from .top_up import HARD_BOUND_FACTOR

# Most solver rewrites fail the ε-gate: in the simulated paper-preset runs (bench/scale/paper_scale.py) a
# stall-triggered round ran in most 4-step blocks. An assumption, stated in the printed line.
REJECT_PROB = 0.8
# The blind auditor calls many near-tie pairs equivalent, and those are dropped: only decided pairs get a
# reveal (probe) or enter the frozen set (V_g). About a third were decided in the simulated runs.
DECIDED_FRACTION = 0.35
# Fitted on the default simulated world at the `paper` preset (bench/results/cost_shortcuts.json, 3 seeds):
# the first blind order was decisive for 0.37-0.44 of pairs, and 18 of 24 verifications were settled by a
# structural regression. Checked on worlds they were not fit to in bench/cost/estimate_accuracy.py.
FIRST_ORDER_DECISIVE = 0.4
SETTLED_BY_STRUCTURAL = 0.7
# A share of steps whose rewrite is not gated, and of rounds whose generator rewrite is invalid: how often a
# model writes a non-skill is not known before it runs, so 0; the run's own outcomes update them.
UNGATED_PROB = 0.0
GENERATOR_INVALID_PROB = 0.0


@dataclass(frozen=True)
class Rates:
    """What a run's calls depend on that only the run shows: assumed before it, measured as it goes."""

    reject: float = REJECT_PROB  # a step keeps the incumbent (its candidate rejected, invalid or absent)
    ungated: float = UNGATED_PROB  # a step's rewrite never reaches the gate: its V_s scoring is not paid
    decided: float = DECIDED_FRACTION  # a near-tie pair survives the blind audit
    first_decisive: float = FIRST_ORDER_DECISIVE
    settled: float = SETTLED_BY_STRUCTURAL
    generator_invalid: float = GENERATOR_INVALID_PROB  # a round's generator rewrite is not verified
    generator_accept: float | None = None  # a round changes the generator (None: `GENERATOR_ACCEPT`)


# Share of generator rounds whose candidate is accepted, by the verification policy. Counted in the simulated
# reproduce at quick sizes (bench/reproduce/reproduce_sim.py, seed 0): audits accepted 1 of 24 candidates,
# the solver's score 4 of 6; rounded up (audits) and down (score), an assumption stated in docs/reproduce.md.
GENERATOR_ACCEPT: Mapping[type, float] = {VerifyByAudits: 0.1, VerifyBySolverScore: 0.5,
                                          AcceptEveryCandidate: 1.0}

HIGH = Rates(reject=1.0, ungated=0.0, decided=1.0, first_decisive=1.0, settled=0.0, generator_invalid=0.0,
             generator_accept=1.0)


@dataclass(frozen=True)
class CallEstimate:
    inner_per_step: float  # expected paid calls of one inner step
    outer_per_round: float  # expected paid calls of one outer round
    steps: int
    scheduled_rounds: int  # every K steps
    max_rounds: int  # if every rewrite is rejected and stalls trigger every round they can
    expected_rounds: float = 0.0  # under REJECT_PROB
    once: float = 0  # paid once per run (the incumbent's first gate scores, rubrics of the splits)
    cached_per_step: int = 0
    cached_per_round: int = 0
    by_role_step: dict[str, float] = field(default_factory=dict)
    by_role_round: dict[str, float] = field(default_factory=dict)
    by_role_once: dict[str, float] = field(default_factory=dict)
    high_per_round: float = 0  # paid calls of a round in which the blind auditor decides every pair
    high_per_step: float | None = None  # paid calls of a step whose rewrite is gated (None: inner_per_step)
    high_once: float | None = None  # paid once if every step and round reaches its gate (None: once)
    once_round: float = 0  # of `once`, paid in the first outer round (the incumbent's V_g rubrics, audits)
    paying_steps: int | None = None  # the most steps that can pay (None: `steps`; a topped-up run passes T)

    @property
    def expected(self) -> int:
        """Expected paid calls."""
        return round(self.once + self.inner_per_step * self.steps + self.outer_per_round * self.expected_rounds)

    @property
    def upper_bound(self) -> int:
        """Paid calls if every rewrite is gated and rejected and every blind pair decided."""
        once = self.once if self.high_once is None else self.high_once
        step = self.inner_per_step if self.high_per_step is None else self.high_per_step
        steps = self.steps if self.paying_steps is None else self.paying_steps
        high = once + step * steps + max(self.high_per_round, self.outer_per_round) * self.max_rounds
        return max(round(high), self.expected)

    @property
    def cached(self) -> int:
        """Expected requests answered by the cache (no call paid)."""
        return round(self.cached_per_step * self.steps + self.cached_per_round * self.expected_rounds)

    def calls_by_role(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for table, times in ((self.by_role_once, 1.0), (self.by_role_step, float(self.steps)),
                             (self.by_role_round, self.expected_rounds)):
            for role, n in table.items():
                out[role] = out.get(role, 0.0) + n * times
        return out

    def dollars(self, price_of: Callable[[str, float, float], float | None],
                tokens: Mapping[str, CallTokens]) -> float | None:
        """Expected USD, given `price_of(role, prompt_tokens, completion_tokens)` (None: unpriced) and the
        tokens per call of each role (`tokens.role_tokens`, or a previous run's `measured_tokens`)."""
        total = 0.0
        for role, n in self.calls_by_role().items():
            per = tokens.get(role, CallTokens(1000.0, 300.0))
            cost = price_of(role, per.prompt, per.completion)
            if cost is None:
                return None
            total += n * cost
        return total


def planned_steps(method: MethodSpec, hyper: Hyper, *, top_up: bool = False) -> int:
    """The inner steps a run of `method` takes: T, or up to `budget_step_cap` × T for Budget-Matched or a
    run topped up to its budget (`budget.top_up`; both stop on the budget), or none for a method that does
    not optimize the solver."""
    if not method.optimize_solver:
        return 0
    return hyper.steps * (hyper.budget_step_cap if method.budget_matched or top_up else 1)


EXACT_STEPS = 1024  # steps the chain below is followed exactly; beyond, its steady rate is extrapolated


def expected_rounds(steps: int, audit_every: int, max_stalls: int, reject_prob: float,
                    schedule: str = "fixed", *, start: int = 0, stalls: int = 0, since: int = 0) -> float:
    """Expected outer rounds of the schedule (`should_audit`) when each rewrite is rejected with
    `reject_prob`: exact over the distribution of (consecutive rejections, steps since the last round,
    capped at K) for the first `EXACT_STEPS` steps; past them the chain has mixed, and the rounds of its
    last whole K-step periods are carried forward, so the cost never grows with a configured T. From step
    `start` with `stalls` consecutive rejections and `since` steps since the last round (a running run's
    state), it counts the rounds of steps `start`..`steps` − 1."""
    since_last = schedule == "since_last_round"
    dist: dict[tuple[int, int], float] = {(stalls, min(since, audit_every) if since_last else 0): 1.0}
    rounds = 0.0
    exact = min(steps, start + EXACT_STEPS)  # steps followed exactly, from `start`
    window = min(exact - start, audit_every * max(1, (EXACT_STEPS // 2) // audit_every)) if steps > exact else 0
    mark = 0.0
    for step in range(start, exact):
        if step == exact - window:
            mark = rounds
        nxt: dict[tuple[int, int], float] = {}
        for (stalls, age), p in dist.items():
            for rejected, q in ((True, reject_prob), (False, 1.0 - reject_prob)):
                if q == 0.0:
                    continue
                count, since = (stalls + 1 if rejected else 0), (min(age + 1, audit_every) if since_last else 0)
                # `since_last_round` counts K from the last round (age K: due); `fixed` ignores it
                if should_audit(step, audit_every, count, max_stalls,
                                last_round=step - since if since_last else None):
                    rounds += p * q
                    count, since = 0, 0
                nxt[(count, since)] = nxt.get((count, since), 0.0) + p * q
        dist = nxt
    if window:
        rounds += (rounds - mark) / window * (steps - exact)
    return rounds


def most_rounds(steps: int, audit_every: int, max_stalls: int, schedule: str = "fixed") -> int:
    """The most outer rounds the schedule allows: those of a run whose every rewrite is rejected (a search over
    every sequence of outcomes finds no more; tests/test_estimate.py). In closed form, so it stays exact past
    `EXACT_STEPS`, where `expected_rounds` extrapolates (at 10,000 steps that fell up to 10 rounds short)."""
    k, m = audit_every, max_stalls
    if schedule == "since_last_round":  # the stalls are the steps since the last round: one every min(K, M)
        return steps // min(k, m)
    # fixed: every K-step block ends with a round, which clears the stalls, and holds one every M steps before it
    return steps // k * (1 + (k - 1) // m) + steps % k // m


Shared = dict[tuple[str, ...], float]  # calls by what makes their requests equal across methods (engine/sharing.py)


def fresh_share(steps: int, drawn: float, reject_prob: float) -> float:
    """Mean share of a step's batch questions not drawn before under the current solver skill: a question is
    in a given batch with probability `drawn` (batch ÷ train), and the skill has stood for k earlier steps with
    probability reject_prob^k (1 − reject_prob), k at most the steps taken."""
    if steps <= 0:
        return 1.0
    # In closed form (a sum over s < steps of Σ_{k<s} (1−r) x^k + x^s, x = r(1−d)): constant time, since
    # nothing sized by a configured step count may run before the first budget check (10^7 steps allowed).
    r, x = reject_prob, reject_prob * (1 - drawn)
    if abs(1 - x) < 1e-12:  # r = 1 and d = 0: every earlier step kept the skill and missed the question
        return ((1 - r) * (steps - 1) / 2) + 1
    geometric = (1 - x ** steps) / (1 - x)  # Σ_{s<steps} x^s
    return ((1 - r) / (1 - x) * (steps - geometric) + geometric) / steps


def _outer_round(method: MethodSpec, hyper: Hyper, sizes: SplitSizes, decided: float, first_decisive: float,
                 settled: float, shared: tuple[Shared, Shared] | None = None, *, generator_invalid: float = 0.0,
                 verified_once: float = 1.0, generator_accept: float | None = None,
                 ) -> tuple[dict[str, float], dict[str, float], int]:
    """Paid calls of one round by role, paid once per run by role, and cached answers per round. `shared`,
    when given, receives the calls of a round (and of the run, once) whose requests depend only on the
    incumbent solver and generator and on the method flags named in their key, not on this method's own
    rewrite: two methods in the same state make them identically. A share `generator_invalid` of the
    rewrites is not verified; `verified_once`: the chance that some round verifies (its once-only calls);
    `generator_accept`: the share of rounds that change the generator (None: `GENERATOR_ACCEPT`)."""
    p, vg, L = sizes.probe, sizes.generator_gate, hyper.rollouts
    short = hyper.decision_shortcuts
    orders = 1 + first_decisive if short else 2  # blind orders asked per pair
    drawn = 1 - settled if short and method.structural_audit else 1  # share of rounds that build Γ
    pairs = min(hyper.pairs_per_question, L // 2)
    rnd: dict[str, float] = {}
    once: dict[str, float] = {}
    cached = 0

    def add(table: dict[str, float], role: str, n: float, *key: str) -> None:
        table[role] = table.get(role, 0) + n
        if key and shared is not None:
            into = shared[0] if table is rnd else shared[1]
            into[(role, *key)] = into.get((role, *key), 0) + n

    # with two rollouts the one pair is every selection's: random and near-tie pairs ask the same
    blind = f"blind={method.rubric_blind},pairs={'the only one' if L == 2 else method.pair_selection}"
    verify = type(method.acceptance).__name__
    # the rewrite's inputs (which audits ran, how they were asked, distilled or not) make its candidate
    cand = f"candidate:s={method.structural_audit},c={method.contrastive_audit},{blind},d={method.distill}"

    # The probe rubrics (and their structural audits) are asked again only once the generator changed: the
    # same requests otherwise, answered by the cache. The first round's, then a share `changed` of rounds.
    changed = (0.0 if method.audit_to_solver or not method.evolve_generator else
               generator_accept if generator_accept is not None else
               GENERATOR_ACCEPT.get(type(method.acceptance), 1.0))
    for role in ("generate_rubric", *(("structural_audit",) if method.structural_audit else ())):
        if method.structural_audit or method.contrastive_audit:
            add(once, role, p * (1 - changed), "probe")
            add(rnd, role, p * changed, "probe")
    if method.contrastive_audit:
        add(rnd, "solve", p * L, "probe")
        add(rnd, "judge", p * L, "probe")
        add(rnd, "contrastive_audit_blind", round(orders * p * pairs), "probe", blind)
        add(rnd, "contrastive_audit_reveal", round(p * pairs * decided), "probe", blind)
    # A round with no audit record (no structural audit, and no pair decided) rewrites nothing
    records = 1.0 if method.structural_audit or not method.contrastive_audit else \
        1 - (1 - decided) ** (p * pairs)

    verified = records * (1 - generator_invalid)  # share of rounds whose candidate is verified

    def add_g(table: dict[str, float], role: str, n: float, *key: str) -> None:
        factor = verified_once if table is once else records if role == "rewrite_generator" else verified
        add(table, role, n * factor, *key)

    if method.evolve_generator and not method.audit_to_solver:
        add_g(rnd, "rewrite_generator", 1, cand)
        if isinstance(method.acceptance, VerifyByAudits):
            add_g(once, "generate_rubric", vg, "V_g")  # the incumbent's V_g rubrics; an accepted candidate's are cached
            add_g(rnd, "generate_rubric", vg, cand)  # the candidate's
            if method.structural_audit:
                add_g(once, "structural_audit", vg, "V_g")
                add_g(rnd, "structural_audit", vg, cand)
                cached += round(vg * verified)  # the incumbent's structural audits
            if method.contrastive_audit:
                add_g(rnd, "solve", round(drawn * vg * L), "V_g")
                frozen = round(vg * pairs * decided)
                # locating judgements, the candidate's margins
                add_g(rnd, "judge", round(drawn * (vg * L + 2 * frozen)), "V_g", cand)
                add_g(rnd, "contrastive_audit_blind", round(drawn * orders * vg * pairs), "V_g", blind)
                cached += round(verified * drawn * 2 * frozen)  # the incumbent's margins are its locating judgements
        elif isinstance(method.acceptance, VerifyBySolverScore):
            add_g(once, "generate_rubric", vg, "V_g")
            add_g(once, "solve", vg, "V_g", verify)
            add_g(once, "judge", vg, "V_g", verify)
            add_g(rnd, "generate_rubric", vg, cand)
            add_g(rnd, "judge", vg, cand, verify)
            cached += round(2 * vg * verified)
        elif isinstance(method.acceptance, AcceptEveryCandidate):
            # A new generator every round: the rubrics of V_s and the incumbent's V_s scores under them are
            # new, and so are those of the batch questions asked again (about half a batch; counted in the
            # simulated reproduce: without them its expected line was 0.67-0.81 of the calls it used)
            regrade = sizes.solver_gate + hyper.batch_size / 2
            add_g(rnd, "generate_rubric", regrade)
            add_g(rnd, "judge", regrade)
    return rnd, once, cached


def estimate_calls(method: MethodSpec, hyper: Hyper, sizes: SplitSizes,
                   reject_prob: float | None = None, seed: int | None = None, rates: Rates | None = None,
                   *, top_up: bool = False) -> CallEstimate:
    """Expected paid and cached calls, one call per judge request in joint mode; repairs not included.
    With the run's `seed`, the repeats of its batches are counted from its own draws (engine/batches.py).
    `rates`: what is assumed of the run's outcomes (the prior `Rates()`; `reject_prob` overrides its
    rejection rate). `top_up`: the run is topped up to its budget past T (`budget.top_up`): its expectation
    is still T steps' (it normally stops on a paired run's usage, `engine.run.paired_calls`), its bound
    `budget_step_cap` × T paying steps."""
    rates = rates or Rates()
    if reject_prob is not None:
        rates = replace(rates, reject=reject_prob)
    reject_prob = rates.reject
    if not method.optimize_solver:
        return CallEstimate(0, 0, 0, 0, 0)
    b, vs = hyper.batch_size, sizes.solver_gate
    steps = planned_steps(method, hyper)
    # A batch question drawn again while the solver skill is unchanged is answered by the cache; a whole
    # batch drawn again (likely with few train questions) repeats the rewrite too, so its candidate and the
    # candidate's V_s scores are cached as well.
    drawn = min(b, sizes.train)
    exact = repeats(seed, steps, sizes.train, b, reject_prob, hyper.steps) if seed is not None else None
    if exact is not None:
        fresh, new_batch, seen = exact.fresh, exact.new_batch, exact.touched
    else:
        fresh = b * fresh_share(steps, drawn / max(sizes.train, 1), reject_prob)
        within = min(steps, hyper.steps)  # past T every rewrite is a fresh sample (engine/top_up.py)
        new_batch = (fresh_share(within, 1 / comb(max(sizes.train, drawn), drawn), reject_prob) * within
                     + (steps - within)) / steps if steps else 1.0
        # train questions drawn in some batch
        seen = round(sizes.train * (1 - (1 - drawn / max(sizes.train, 1)) ** steps))
    gated = 1 - rates.ungated  # a rewrite that is not a skill (or no rewrite) is never scored on V_s
    step = {"solve": fresh + vs * new_batch * gated, "judge": fresh + vs * new_batch * gated,
            "rewrite_solver": new_batch}
    # the dearest step: every batch question answered and judged afresh (the skill changed at every step, so
    # the cache answers none), a fresh rewrite, gated on V_s. Not the expectation's `fresh`, which assumes
    # REJECT_PROB: a run accepting more often than that paid more than a bound built on it (a SkillOpt run
    # whose bound equalled its estimate was exceeded)
    high_step = 2 * (drawn + vs) + 1
    # steps that can pay: a topped-up run passes T (its idle steps, all cache hits, pay nothing)
    paying = planned_steps(method, hyper, top_up=True) if top_up else steps
    all_steps = HARD_BOUND_FACTOR * paying if top_up else steps
    # Once: the incumbent's first V_s scores (at the first gated step), and one rubric per question the run
    # touches (the train questions drawn, V_s); later steps reuse them while the generator is unchanged.
    some_gated = 1 - rates.ungated ** steps
    once: dict[str, float] = {"solve": vs * some_gated, "judge": vs * some_gated,
                              "generate_rubric": seen + vs * some_gated}
    high_once = 3 * vs + (min(sizes.train, drawn * all_steps) if top_up else seen)  # a rubric per question touched
    # the incumbent's V_s answers and judgements, repeated questions, repeated batches' rewrites and challengers
    cached_step = round(2 * vs * gated + 2 * (b - fresh) + (1 + 2 * vs * gated) * (1 - new_batch))
    if not method.runs_audits:
        return CallEstimate(sum(step.values()), 0, steps, 0, 0, 0.0, sum(once.values()), cached_step, 0,
                            step, {}, once, high_per_step=high_step, high_once=high_once, paying_steps=paying)
    rounds = expected_rounds(steps, hyper.audit_every, hyper.max_stalls, reject_prob, hyper.audit_schedule)
    rnd, once_outer, cached_round = _outer_round(
        method, hyper, sizes, rates.decided, rates.first_decisive, rates.settled,
        generator_invalid=rates.generator_invalid, verified_once=1 - rates.generator_invalid ** max(rounds, 1.0),
        generator_accept=rates.generator_accept)
    high_rnd, high_once_outer, _ = _outer_round(  # every pair decided, every candidate verified and accepted
        method, hyper, sizes, HIGH.decided, HIGH.first_decisive, HIGH.settled, generator_accept=HIGH.generator_accept)
    for role, n in once_outer.items():
        once[role] = once.get(role, 0) + n
    # a round that pays is in a step that pays: at most one per paying step, however many steps are taken
    most = min(most_rounds(all_steps, hyper.audit_every, hyper.max_stalls, hyper.audit_schedule), paying)
    return CallEstimate(
        sum(step.values()), sum(rnd.values()), steps, steps // hyper.audit_every, most,
        rounds, sum(once.values()), cached_step, cached_round, step, rnd, once, sum(high_rnd.values()),
        high_per_step=high_step, high_once=high_once + sum(high_once_outer.values()),
        once_round=sum(once_outer.values()), paying_steps=paying)
