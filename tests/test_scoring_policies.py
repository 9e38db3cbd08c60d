"""The paper's equations and policies on hand-computed cases."""

from __future__ import annotations

import random

import pytest

from decoevo.domain import Criterion, CriterionScore, Judgement, Rubric
from decoevo.engine.pairs import select_near_tie_pairs, select_random_pairs
from decoevo.policies import (
    AcceptAll,
    AuditObjectives,
    ParetoAcceptance,
    ScoreCoupledAcceptance,
    SolverGate,
    should_audit,
)
from decoevo.scoring import (
    contrastive_resolution,
    mean_score,
    pair_margin,
    rubric_score,
    structural_adequacy,
    weighted_score,
)


def test_weighted_score_eq2():
    # (3*1 + 1*0.5 + 4*0.25) / 8 = 4.5 / 8
    assert weighted_score([3, 1, 4], [1.0, 0.5, 0.25]) == pytest.approx(0.5625)
    rubric = Rubric(question_id="q", generator_version=0,
                    criteria=(Criterion(text="a", weight=2), Criterion(text="b", weight=6)))
    judgement = Judgement(question_id="q", scores=(CriterionScore(score=1.0), CriterionScore(score=0.0)))
    assert rubric_score(rubric, judgement) == pytest.approx(0.25)


@pytest.mark.parametrize("weights,scores", [([], []), ([1], [0.5, 0.5]), ([0], [1]), ([1], [1.5])])
def test_weighted_score_rejects_invalid_input(weights, scores):
    with pytest.raises(ValueError):
        weighted_score(weights, scores)


def test_mean_and_structural_adequacy_eq3_eq5():
    assert mean_score({"a": 0.2, "b": 0.6}) == pytest.approx(0.4)
    assert structural_adequacy([0.5, 1.0, 0.0]) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        mean_score({})


def test_contrastive_resolution_is_question_balanced_eq8():
    # q1: 1 of 2 pairs resolved (0.3 ≥ 0.2, 0.1 < 0.2) -> 0.5; q2: 1 of 1 -> 1.0; mean 0.75
    margins = {"q1": [pair_margin(0.8, 0.5), pair_margin(0.6, 0.5)], "q2": [0.2]}
    assert contrastive_resolution(margins, gamma=0.2) == pytest.approx(0.75)
    # pair-weighted would give 2/3: balancing matters
    assert contrastive_resolution({}, gamma=0.2) is None
    assert contrastive_resolution({"q": []}, gamma=0.2) is None
    with pytest.raises(ValueError):
        contrastive_resolution(margins, gamma=0.0)


def test_solver_gate_eq4_is_strict_and_paired():
    gate = SolverGate(epsilon=0.05)
    assert gate.decide({"a": 0.5, "b": 0.5}, {"a": 0.6, "b": 0.5}).accepted is False  # +0.05 is not > ε
    d = gate.decide({"a": 0.5, "b": 0.5}, {"a": 0.7, "b": 0.5})
    assert d.accepted and d.delta == pytest.approx(0.1) and d.n == 2
    with pytest.raises(ValueError):
        gate.decide({"a": 0.5}, {"b": 0.9})


def test_pareto_acceptance_eq10():
    policy = ParetoAcceptance(delta=0.05, eta=0.02)
    old = AuditObjectives(structural=0.5, contrastive=0.5)
    assert policy.decide(old, AuditObjectives(0.6, 0.49)).accepted  # one up by > δ, other within η
    assert not policy.decide(old, AuditObjectives(0.6, 0.47)).accepted  # other regressed beyond η
    assert not policy.decide(old, AuditObjectives(0.54, 0.54)).accepted  # nothing beyond δ
    # only the objectives available on both sides count
    assert policy.decide(AuditObjectives(0.5, None), AuditObjectives(0.6, None)).accepted
    decision = policy.decide(AuditObjectives(None, None), AuditObjectives(None, None))
    assert not decision.accepted and "no audit objective" in decision.reason


def test_other_generator_policies():
    assert AcceptAll().decide(AuditObjectives(), AuditObjectives()).accepted
    sc = ScoreCoupledAcceptance(margin=0.01)
    assert sc.decide(0.5, 0.6).accepted and not sc.decide(0.5, 0.505).accepted


def test_every_policy_and_decision_is_frozen():
    """A policy is a value: the run's thresholds (δ, η, z, ε) cannot be changed on a live policy object, and
    a decision once logged cannot be edited after the fact."""
    import dataclasses

    import decoevo.policies as policies

    classes = [c for c in vars(policies).values() if isinstance(c, type) and dataclasses.is_dataclass(c)
               and c.__module__ == policies.__name__]
    assert len(classes) >= 10
    for cls in classes:
        assert cls.__dataclass_params__.frozen, f"{cls.__name__} is not frozen"  # type: ignore[attr-defined]
    bound = policies.ParetoBoundAcceptance(delta=0.01, eta=0.01, z=1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        bound.delta = -1.0  # type: ignore[misc]


def test_audit_objectives_cannot_carry_a_solver_score():
    with pytest.raises(TypeError):
        AuditObjectives(structural=0.5, contrastive=0.5, solver_score=0.9)  # type: ignore[call-arg]


def test_outer_loop_trigger():
    assert [should_audit(t, 3, 0, 2) for t in range(6)] == [False, False, True, False, False, True]
    assert should_audit(0, 3, 2, 2)


def test_outer_loop_trigger_counting_from_the_last_round():
    # a stall-triggered round after step 1 moves the next scheduled one from step 2 to step 4
    assert [should_audit(t, 3, 0, 2, last_round=1) for t in range(2, 6)] == [False, False, True, True]
    assert [should_audit(t, 3, 0, 2, last_round=-1) for t in range(4)] == [False, False, True, True]
    assert should_audit(2, 3, 2, 2, last_round=1)  # M stalls still trigger at once


def test_near_tie_pairs_smallest_gaps_first_no_reuse_at_most_h():
    scores = [0.50, 0.52, 0.90, 0.51, 0.10, 0.88]
    # gaps: (0,3)=.01 (1,3)=.01 (0,1)=.02 (2,5)=.02 ...; (0,3) taken first, then (1,3) blocked, (0,1) blocked
    assert select_near_tie_pairs(scores, tau=0.05, max_pairs=5) == [(0, 3), (2, 5)]
    assert select_near_tie_pairs(scores, tau=0.05, max_pairs=1) == [(0, 3)]
    assert select_near_tie_pairs(scores, tau=0.0, max_pairs=5) == []
    assert select_near_tie_pairs([0.3, 0.3], tau=0.0, max_pairs=1) == [(0, 1)]


def test_random_pairs_are_disjoint_and_seeded():
    a = select_random_pairs(6, 3, random.Random(1))
    assert a == select_random_pairs(6, 3, random.Random(1))
    flat = [i for p in a for i in p]
    assert len(flat) == len(set(flat)) == 6 and all(i < j for i, j in a)


def test_random_pairs_ignore_the_rollout_order():
    """The ablation draws its pairs: over seeds they differ, and not only neighbours (0, 1), (2, 3) pair up,
    or "random pairs" would be rollouts adjacent in sampling order."""
    draws = {tuple(select_random_pairs(6, 3, random.Random(seed))) for seed in range(20)}
    assert len(draws) > 5
    assert any(p not in {(0, 1), (2, 3), (4, 5)} for d in draws for p in d)


def test_failure_selection_lowest_first_and_only_imperfect():
    from decoevo.policies import select_failures

    assert select_failures({"a": 0.9, "b": 0.2, "c": 1.0, "d": 0.5}, 2) == ["b", "d"]
    assert select_failures({"a": 1.0}, 3) == []


def test_each_method_carries_its_verification_and_its_group() -> None:
    """A method holds the object that verifies its generators (not a name the loop dispatches on) and its
    report group; only SC-CoEvo's verification builds a policy that decides on a solver score."""
    from decoevo.engine.config import Hyper
    from decoevo.methods import METHODS
    from decoevo.policies import (
        AcceptEveryCandidate,
        GeneratorAcceptance,
        SolverScoreAcceptance,
        VerifyByAudits,
        VerifyBySolverScore,
    )
    from decoevo.report.labels import ABLATIONS, CONTROLS, MAIN

    h = Hyper()
    kinds = {name: type(m.acceptance) for name, m in METHODS.items()}
    assert kinds["decoevo"] is VerifyByAudits and kinds["sc_coevo"] is VerifyBySolverScore
    assert kinds["no_verification"] is AcceptEveryCandidate
    for name, m in METHODS.items():
        policy = m.acceptance.policy(h)
        coupled = isinstance(m.acceptance, VerifyBySolverScore)
        assert (name == "sc_coevo") == coupled
        assert isinstance(policy, SolverScoreAcceptance if coupled else GeneratorAcceptance), name
    assert {m.group for m in METHODS.values()} == {"baseline", "method", "ablation", "control"}
    assert MAIN == ("zero_shot", "skillopt", "sc_coevo", "decoevo")
    assert set(ABLATIONS) == {n for n, m in METHODS.items() if m.group == "ablation"} and len(ABLATIONS) == 6
    assert CONTROLS == ("task_prior", "budget_matched", "direct_audit")
