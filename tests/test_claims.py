"""The paper's claims as data (issue 17 item 8): the bundled file is well formed and cites the paper, and
the evaluator gives supported / contradicted / not enough runs from paired effects with intervals."""

from __future__ import annotations

import pytest

from decoevo.analysis.claims import (
    CONTRADICTED,
    NOT_ENOUGH,
    SUPPORTED,
    Claim,
    TableEvidence,
    evaluate_claim,
    evaluate_claims,
    load_claims,
)
from decoevo.methods import METHODS


def claim(**kw) -> Claim:
    base = {
        "id": "c",
        "section": "§4.2",
        "statement": "s",
        "paper": "p",
        "measure": "score",
        "tests": [{"a": "decoevo", "b": "skillopt", "direction": "above"}],
    }
    return Claim.model_validate({**base, **kw})


def scores(**by_method_col: list[float]) -> TableEvidence:
    """scores(decoevo__hb=[...], skillopt__hb=[...]): per-seed values for one backbone."""
    values = {}
    for key, xs in by_method_col.items():
        method, col = key.split("__")
        values[("gpt", col, "score", method)] = dict(enumerate(xs))
    return TableEvidence(values)


def test_the_bundled_claims_cite_the_paper_and_name_known_methods():
    claims = load_claims()
    ids = [c.id for c in claims]
    assert len(ids) == len(set(ids)) >= 12
    for c in claims:
        assert c.section.startswith("§"), c.id
        for t in c.tests:
            assert t.a in METHODS and (t.b is None or t.b in METHODS), c.id
    # the brief's list: every main claim the paper makes is there
    assert {
        "decoevo_above_skillopt_every_setting",
        "sc_coevo_below_skillopt_most",
        "ablations_below_decoevo",
        "no_verification_largest_loss",
        "task_prior_and_budget_small_gains",
        "direct_audit_between",
        "alignment_f1_up",
        "alignment_precision_and_recall_up",
        "alignment_sc_coevo_lower",
        "cost_ratio",
        "sc_coevo_gold_peaks_then_falls",
        "sc_coevo_proxy_stays_high",
    } <= set(ids)


def test_every_setting_supported_contradicted_or_undecided():
    c = claim()
    clear = scores(
        decoevo__hb=[55, 56, 54.5], skillopt__hb=[50, 50.5, 50], decoevo__wb=[60, 61, 60], skillopt__wb=[58, 58, 57.5]
    )
    result = evaluate_claim(c, clear)
    assert result.verdict == SUPPORTED and len(result.effects) == 2
    hb = next(e for e in result.effects if e.setting.column == "hb")
    assert hb.mean == pytest.approx(5.0) and hb.ci_low > 0 and hb.n == 3
    # one setting where DecoEvo is clearly below: contradicted, whatever the other says
    against = scores(
        decoevo__hb=[55, 56, 54.5], skillopt__hb=[50, 50.5, 50], decoevo__wb=[55, 55.5, 54], skillopt__wb=[58, 58, 57.5]
    )
    assert evaluate_claim(c, against).verdict == CONTRADICTED
    # a noisy gap whose interval includes 0: more seeds would decide
    noisy = scores(decoevo__hb=[55, 49, 53], skillopt__hb=[50, 52, 50])
    r = evaluate_claim(c, noisy)
    assert r.verdict == NOT_ENOUGH and "more seeds" in r.reason
    # one seed: no interval
    assert evaluate_claim(c, scores(decoevo__hb=[55], skillopt__hb=[50])).verdict == NOT_ENOUGH
    # a method that never ran
    r = evaluate_claim(c, scores(decoevo__hb=[55, 56]))
    assert r.verdict == NOT_ENOUGH and "no paired runs" in r.reason


def test_most_and_the_per_backbone_average():
    c = claim(quantifier="most", tests=[{"a": "sc_coevo", "b": "skillopt", "direction": "below"}])
    ev = scores(
        sc_coevo__a=[47, 47.5, 46],
        skillopt__a=[50, 50, 49.5],
        sc_coevo__b=[45, 45.2, 44],
        skillopt__b=[48, 48, 47],
        sc_coevo__c=[52, 52.5, 53],
        skillopt__c=[50, 50, 50.5],
    )
    assert evaluate_claim(c, ev).verdict == SUPPORTED  # 2 of 3 settings below
    avg = evaluate_claim(
        claim(scope="average"),
        scores(decoevo__a=[55, 56], skillopt__a=[50, 50], decoevo__b=[40, 41], skillopt__b=[42, 42.5]),
    )
    (e,) = avg.effects
    assert e.setting.column == "average" and e.mean == pytest.approx(
        ((55 + 40) - (50 + 42) + (56 + 41) - (50 + 42.5)) / 4
    )


def test_magnitudes_ratios_and_one_method_measures():
    f1 = claim(
        measure="f1", tests=[{"a": "decoevo", "b": "skillopt", "direction": "above", "expected": 12, "tolerance": 6}]
    )
    ev = TableEvidence(
        {
            ("gpt", "hb", "f1", "decoevo"): {0: 57.0, 1: 56.0, 2: 58.0},
            ("gpt", "hb", "f1", "skillopt"): {0: 44.0, 1: 45.0, 2: 45.5},
        }
    )
    assert evaluate_claim(f1, ev).verdict == SUPPORTED
    small = TableEvidence(
        {
            ("gpt", "hb", "f1", "decoevo"): {0: 46.0, 1: 47.0, 2: 46.5},
            ("gpt", "hb", "f1", "skillopt"): {0: 44.0, 1: 45.0, 2: 45.5},
        }
    )
    assert evaluate_claim(f1, small).verdict == CONTRADICTED  # above, but far from +12
    cost = claim(
        measure="tokens",
        tests=[{"a": "decoevo", "b": "skillopt", "direction": "around", "expected": 1.89, "tolerance": 0.3}],
    )
    tokens = TableEvidence(
        {
            ("gpt", "hb", "tokens", "decoevo"): {0: 5.8e6, 1: 6.0e6},
            ("gpt", "hb", "tokens", "skillopt"): {0: 1.0e6, 1: 1.02e6},
        }
    )
    r = evaluate_claim(cost, tokens)
    assert r.verdict == CONTRADICTED and r.effects[0].mean == pytest.approx((5.8 + 6.0 / 1.02) / 2)
    drop = claim(measure="gold_drop", tests=[{"a": "sc_coevo", "direction": "above"}])
    falls = TableEvidence({("gpt", "hb", "gold_drop", "sc_coevo"): {0: 3.0, 1: 4.5, 2: 2.5}})
    flat = TableEvidence({("gpt", "hb", "gold_drop", "sc_coevo"): {0: 0.0, 1: 0.0, 2: 0.0}})
    assert evaluate_claim(drop, falls).verdict == SUPPORTED
    assert evaluate_claim(drop, flat).verdict == CONTRADICTED  # never fell below its peak


def test_all_claims_on_no_runs_are_not_enough_runs():
    results = evaluate_claims(TableEvidence({}))
    assert results and {r.verdict for r in results} == {NOT_ENOUGH}
