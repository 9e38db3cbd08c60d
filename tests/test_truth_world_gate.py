"""The noise-aware solver gate (`hyper.solver_gate: paired_bound`): a pure policy, and what it changes in
the known-truth world."""

from __future__ import annotations

import random

import pytest

from decoevo.engine.config import Hyper
from decoevo.policies import (
    AuditObjectives,
    PairedBoundGate,
    ParetoAcceptance,
    ParetoBoundAcceptance,
    SolverGate,
    VerifyByAudits,
    solver_gate,
)


def test_the_bound_accepts_a_consistent_gain_and_refuses_one_carried_by_a_single_question():
    gate = PairedBoundGate(epsilon=0.01, z=1.645)
    old = {f"q{i}": 0.5 for i in range(8)}
    steady = gate.decide(old, {q: 0.6 for q in old})  # +0.1 on every question: no spread
    assert steady.accepted and steady.delta == pytest.approx(0.1) and steady.n == 8
    lucky = {**old, "q0": 1.0}  # +0.5 on one question, nothing elsewhere: mean +0.0625 > ε
    assert SolverGate(0.01).decide(old, lucky).accepted  # the point margin takes it
    assert not gate.decide(old, lucky).accepted  # the bound does not: the gain is within the spread
    with pytest.raises(ValueError):
        gate.decide({"a": 0.5}, {"b": 0.9})


def test_the_bound_is_the_point_margin_for_one_question_and_strict():
    gate = PairedBoundGate(epsilon=0.05, z=1.645)
    assert not gate.decide({"a": 0.5}, {"a": 0.54}).accepted  # +0.04 is not > ε
    assert gate.decide({"a": 0.5}, {"a": 0.56}).accepted


def test_false_accepts_of_equal_candidates_fall_under_noise():
    rng = random.Random(0)
    point, bound = SolverGate(0.01), PairedBoundGate(0.01, 1.645)
    accepts = {"point": 0, "bound": 0}
    for _ in range(400):  # two skills of equal quality, each question scored with judge noise
        old = {f"q{i}": rng.gauss(0.6, 0.15) for i in range(12)}
        new = {q: rng.gauss(0.6, 0.15) for q in old}
        accepts["point"] += point.decide(old, new).accepted
        accepts["bound"] += bound.decide(old, new).accepted
    assert accepts["point"] / 400 > 0.3 and accepts["bound"] / 400 < 0.08


def test_the_configuration_chooses_the_gate_and_the_margin_stays_the_default():
    assert isinstance(solver_gate(Hyper()), SolverGate)
    chosen = solver_gate(Hyper(solver_gate="paired_bound", solver_gate_z=2.0, epsilon=0.02))
    assert chosen == PairedBoundGate(epsilon=0.02, z=2.0)


def _objectives(structural: dict[str, float], signed: dict[str, float]) -> AuditObjectives:
    resolved = sum(1 for v in signed.values() if v > 0) / len(signed) if signed else None
    return AuditObjectives(
        structural=sum(structural.values()) / len(structural),
        contrastive=resolved,
        structural_items=structural,
        contrastive_items=signed,
    )


def test_the_pareto_bound_refuses_a_gain_that_one_question_carries_and_pairs_resolved_either_way():
    rule = ParetoBoundAcceptance(delta=0.02, eta=0.02, z=1.645)
    old = _objectives({f"q{i}": 0.8 for i in range(10)}, {f"p{i}": 0.0 for i in range(6)})
    # Δ_str = +0.04 > δ, carried by two of ten questions: the point rule takes it, the bound does not.
    lucky = _objectives({**{f"q{i}": 0.8 for i in range(10)}, "q0": 1.0, "q1": 1.0}, {f"p{i}": 0.0 for i in range(6)})
    assert ParetoAcceptance(0.02, 0.02).decide(old, lucky).accepted
    assert not rule.decide(old, lucky).accepted
    # A candidate that resolves two pairs the right way and two the wrong way: eq. 9 sees +0.33, the
    # signed resolutions see nothing.
    mixed = _objectives({f"q{i}": 0.8 for i in range(10)}, {"p0": 1, "p1": 1, "p2": -1, "p3": -1, "p4": 0, "p5": 0})
    assert ParetoAcceptance(0.02, 0.02).decide(old, mixed).accepted
    decision = rule.decide(old, mixed)
    assert not decision.accepted and decision.deltas["contrastive_lower_bound"] < 0.02
    steady = _objectives({f"q{i}": 1.0 for i in range(10)}, {f"p{i}": 1.0 for i in range(6)})
    assert rule.decide(old, steady).accepted  # every question and every pair better: no spread
    worse = _objectives({f"q{i}": 0.5 for i in range(10)}, {f"p{i}": 1.0 for i in range(6)})
    assert "regressed" in rule.decide(old, worse).reason  # regression as in eq. 10


def test_without_items_the_pareto_bound_is_the_paper_rule_and_the_configuration_chooses_it():
    rule = ParetoBoundAcceptance(delta=0.05, eta=0.02, z=1.645)
    old, new = AuditObjectives(0.5, 0.5), AuditObjectives(0.6, 0.49)
    assert rule.decide(old, new).accepted == ParetoAcceptance(0.05, 0.02).decide(old, new).accepted is True
    assert isinstance(VerifyByAudits().policy(Hyper()), ParetoAcceptance)
    chosen = VerifyByAudits().policy(Hyper(generator_gate="paired_bound", generator_gate_z=2.0))
    assert chosen == ParetoBoundAcceptance(delta=0.02, eta=0.02, z=2.0)
