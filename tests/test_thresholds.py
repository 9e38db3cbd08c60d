"""Every threshold of the method decided exactly at its boundary (eqs. 4, 6, 8, 10, the SC-CoEvo margin).

Each case is drawn so that the paper's quantity lands exactly on the threshold in exact rational
arithmetic (fractions.Fraction over the decimals the model reported); the decision must be the one the
paper's strict or non-strict rule gives, in every draw. Plain float comparison gets a majority of these
wrong (each test checks that its draws include such cases, so it keeps its power).
"""

from __future__ import annotations

import random
from fractions import Fraction

from decoevo.engine.pairs import select_near_tie_pairs
from decoevo.policies import AuditObjectives, ParetoAcceptance, ScoreCoupledAcceptance, SolverGate, select_failures
from decoevo.scoring import contrastive_resolution, pair_margin, structural_adequacy, weighted_score

DRAWS = 400


def tenths(rng: random.Random, n: int) -> list[float]:
    return [rng.randint(0, 10) / 10 for _ in range(n)]


def exact_mean(xs: list[float]) -> Fraction:
    return sum((Fraction(str(x)) for x in xs), Fraction(0)) / len(xs)


def shifted(rng: random.Random, old: list[float], steps: int) -> list[float]:
    """A copy of `old` whose sum moves by `steps` tenths (each move keeps values in [0, 1])."""
    new = [round(x * 10) for x in old]
    moved = 0
    while moved != steps:
        i = rng.randrange(len(new))
        d = 1 if steps > moved else -1
        if 0 <= new[i] + d <= 10:
            new[i] += d
            moved += d
    return [v / 10 for v in new]


def test_structural_delta_of_exactly_delta_is_not_an_improvement_eq10():
    rng = random.Random(1)
    policy = ParetoAcceptance(delta=0.02, eta=0.02)
    float_says_above = 0
    for _ in range(DRAWS):
        old = tenths(rng, 20)
        new = shifted(rng, old, 4)  # Δ_str = 0.4 / 20 = δ exactly
        assert exact_mean(new) - exact_mean(old) == Fraction(1, 50)
        phi_old, phi_new = structural_adequacy(old), structural_adequacy(new)
        float_says_above += phi_new - phi_old > 0.02
        decision = policy.decide(AuditObjectives(structural=phi_old), AuditObjectives(structural=phi_new))
        assert not decision.accepted, decision
    assert float_says_above > 0


def test_structural_delta_of_exactly_minus_eta_is_not_a_regression_eq10():
    rng = random.Random(2)
    policy = ParetoAcceptance(delta=0.02, eta=0.02)
    float_says_regressed = 0
    for _ in range(DRAWS):
        old = tenths(rng, 20)
        new = shifted(rng, old, -4)  # Δ_str = −η exactly; Φ_ctr clearly improves
        phi_old, phi_new = structural_adequacy(old), structural_adequacy(new)
        float_says_regressed += phi_new - phi_old < -0.02
        decision = policy.decide(
            AuditObjectives(structural=phi_old, contrastive=0.5), AuditObjectives(structural=phi_new, contrastive=0.75)
        )
        assert decision.accepted, decision
    assert float_says_regressed > 0


def test_a_margin_of_exactly_gamma_resolves_the_pair_eq8():
    rng = random.Random(3)
    gamma = 0.05
    exact_cases = float_says_unresolved = 0
    while exact_cases < DRAWS // 4:  # drawn by rejection: a quarter keeps the test to a second
        weights = [float(rng.randint(1, 5)) for _ in range(rng.randint(2, 6))]
        plus, minus = tenths(rng, len(weights)), tenths(rng, len(weights))
        w = [Fraction(str(x)) for x in weights]
        exact = sum(
            (wi * (Fraction(str(a)) - Fraction(str(b))) for wi, a, b in zip(w, plus, minus, strict=True)), Fraction(0)
        ) / sum(w)
        if exact != Fraction(1, 20):
            continue
        exact_cases += 1
        m = pair_margin(weighted_score(weights, plus), weighted_score(weights, minus))
        float_says_unresolved += m < gamma
        assert contrastive_resolution({"q": [m]}, gamma) == 1.0
    assert float_says_unresolved > 0


def test_a_gap_of_exactly_tau_tie_is_a_near_tie_eq6():
    rng = random.Random(4)
    tau = 0.15
    exact_cases = float_says_apart = 0
    while exact_cases < DRAWS:
        a, b = rng.randint(0, 20) / 20, rng.randint(0, 20) / 20
        if abs(Fraction(str(a)) - Fraction(str(b))) != Fraction(3, 20):
            continue
        exact_cases += 1
        float_says_apart += abs(a - b) > tau
        assert select_near_tie_pairs([a, b], tau, 1) == [(0, 1)]
    assert float_says_apart > 0


def test_a_solver_gain_of_exactly_epsilon_is_a_stall_eq4():
    rng = random.Random(5)
    gate = SolverGate(epsilon=0.01)
    float_says_above = 0
    for _ in range(DRAWS):
        old = tenths(rng, 30)
        new = shifted(rng, old, 3)  # J gain = 0.3 / 30 = ε exactly
        ids = [f"q{i}" for i in range(30)]
        inc, cand = dict(zip(ids, old, strict=True)), dict(zip(ids, new, strict=True))
        float_says_above += sum(new) / 30 > sum(old) / 30 + 0.01
        assert not gate.decide(inc, cand).accepted
        # one more tenth on one question is a genuine gain above ε
        better = shifted(rng, new, 1)
        assert gate.decide(inc, dict(zip(ids, better, strict=True))).accepted
    assert float_says_above > 0


def test_score_coupled_margin_and_failure_selection_at_the_boundary():
    rng = random.Random(6)
    policy = ScoreCoupledAcceptance(margin=0.02)
    float_says_above = 0
    for _ in range(DRAWS):
        old = tenths(rng, 20)
        new = shifted(rng, old, 4)
        j_old, j_new = sum(old) / 20, sum(new) / 20
        float_says_above += j_new - j_old > 0.02
        assert not policy.decide(j_old, j_new).accepted
    assert float_says_above > 0
    # a rubric that credits every criterion fully is not a failure, whatever the weights' float sum
    full = weighted_score([0.1, 0.2, 0.3, 0.7], [1.0, 1.0, 1.0, 1.0])
    assert select_failures({"q": full}, 1) == []


def test_a_difference_of_exactly_the_tolerance_is_still_a_tie():
    """The tolerance band is closed: a value exactly SCORE_TOLERANCE above a threshold does not exceed it,
    and one exactly SCORE_TOLERANCE below still reaches it (so a strict rule never accepts, and a non-strict
    rule never refuses, a value the tolerance calls equal). 0.0 ± tolerance is exact in floats."""
    from decoevo.thresholds import SCORE_TOLERANCE, below, exceeds, reaches

    assert not exceeds(SCORE_TOLERANCE, 0.0) and exceeds(2 * SCORE_TOLERANCE, 0.0)
    assert reaches(-SCORE_TOLERANCE, 0.0) and not below(-SCORE_TOLERANCE, 0.0)
    assert below(-2 * SCORE_TOLERANCE, 0.0)
