"""The paper's claims as data (issue 17 item 8): the bundled file is well formed and cites the paper, and
the evaluator gives supported / contradicted / not enough runs from paired effects with intervals."""

from __future__ import annotations

import pytest

from decoevo.analysis.claims import (
    CONTRADICTED,
    NOT_ENOUGH,
    NOT_RUN,
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
        # issue 25 item 5: the rest of §4
        "decoevo_above_every_baseline",
        "decoevo_relative_gain",
        "transfer_relative_gain",
        "skillopt_above_zero_shot",
        "contrastive_loss_larger_than_structural",
        "task_prior_and_budget_gains_positive",
        "decoevo_highest_final_gold",
    } <= set(ids)
    by_id = {c.id: c for c in claims}
    assert by_id["decoevo_above_skillopt_average"].decision == "holm"
    assert by_id["skillopt_above_zero_shot"].quantifier == "share"


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
    # a method that never ran: its table was not requested, which is not a lack of seeds
    r = evaluate_claim(c, scores(decoevo__hb=[55, 56]))
    assert r.verdict == NOT_RUN and "skillopt" in r.reason and "not run" in r.reason


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


def test_all_claims_on_no_runs_are_not_run():
    results = evaluate_claims(TableEvidence({}))
    assert results and {r.verdict for r in results} == {NOT_RUN}


def _three_backbones(diffs: list[float]) -> TableEvidence:
    values = {}
    for bb in ("gpt", "q4", "q8"):
        values[(bb, "hb", "score", "skillopt")] = dict.fromkeys(range(len(diffs)), 50.0)
        values[(bb, "hb", "score", "decoevo")] = {i: 50.0 + d for i, d in enumerate(diffs)}
    return TableEvidence(values)


def test_a_holm_claim_is_decided_on_holm_adjusted_p_values():
    """Issue 25 item 5: three backbones at p ≈ 0.03 each have unadjusted intervals above 0, but Holm's
    adjusted p is ≈ 0.09: the Holm-corrected claim is not supported (before, it was)."""
    from scipy import stats as sps

    diffs = [1.0, 3.0, 0.5, 2.0, 4.0]
    p = sps.ttest_1samp(diffs, 0.0).pvalue
    assert 0.05 / 3 < p < 0.05
    ev = _three_backbones(diffs)
    by_interval = evaluate_claim(claim(scope="average"), ev)
    assert by_interval.verdict == SUPPORTED and all(e.ci_low > 0 for e in by_interval.effects)
    by_holm = evaluate_claim(claim(scope="average", decision="holm"), ev)
    assert by_holm.verdict == NOT_ENOUGH and "Holm" in by_holm.reason
    assert [e.p_holm for e in by_holm.effects] == pytest.approx([min(1.0, 3 * p)] * 3)
    strong = evaluate_claim(claim(scope="average", decision="holm"), _three_backbones([2.0, 2.1, 1.9, 2.2, 2.0]))
    assert strong.verdict == SUPPORTED
    below = evaluate_claim(claim(scope="average", decision="holm"), _three_backbones([-2.0, -2.1, -1.9, -2.2]))
    assert below.verdict == CONTRADICTED


def test_share_claims_and_relative_gains():
    c = claim(quantifier="share", share=0.6, tests=[{"a": "skillopt", "b": "zero_shot", "direction": "above"}])
    up, down, tie = [50, 51, 50.5], [40, 40.2, 40.1], [45, 30, 50]
    three_of_four = scores(skillopt__a=up, zero_shot__a=down, skillopt__b=up, zero_shot__b=down,
                           skillopt__c=up, zero_shot__c=down, skillopt__d=down, zero_shot__d=up)
    assert evaluate_claim(c, three_of_four).verdict == SUPPORTED  # 3 of 4 ≥ 60%
    two_of_four = scores(skillopt__a=up, zero_shot__a=down, skillopt__b=up, zero_shot__b=down,
                         skillopt__c=down, zero_shot__c=up, skillopt__d=down, zero_shot__d=up)
    assert evaluate_claim(c, two_of_four).verdict == CONTRADICTED  # 2 against: 60% can no longer hold
    undecided = scores(skillopt__a=up, zero_shot__a=down, skillopt__b=tie, zero_shot__b=down,
                       skillopt__c=tie, zero_shot__c=down)
    assert evaluate_claim(c, undecided).verdict == NOT_ENOUGH
    with pytest.raises(ValueError):
        claim(quantifier="share")
    gain = claim(measure="gain", tests=[{"a": "decoevo", "b": "skillopt", "direction": "around", "expected": 4.0,
                                         "tolerance": 1.0}])
    r = evaluate_claim(gain, scores(decoevo__hb=[52, 52.5, 52.2], skillopt__hb=[50, 50.5, 50.2]))
    assert r.effects[0].mean == pytest.approx(100 * (2 / 50 + 2 / 50.5 + 2 / 50.2) / 3)
    assert r.verdict == SUPPORTED


def test_trajectory_measures_are_not_one_sided_by_construction():
    """Issue 25 item 5: the gold drop is the best checkpoint before the last minus the last, so a rising
    trajectory has a negative drop; on a flat one the proxy claim is not supported vacuously."""
    from types import SimpleNamespace

    from decoevo.report.claim_evidence import _run_value

    def run(golds: list[float], proxies: list[float]) -> SimpleNamespace:
        pts = [SimpleNamespace(gold=g, proxy=p) for g, p in zip(golds, proxies, strict=True)]
        return SimpleNamespace(dynamics=SimpleNamespace(points=pts))

    rising = run([40, 42, 45], [60, 65, 70])
    assert _run_value(rising, "gold_drop") == pytest.approx(-3.0)  # before: 0 (the peak was the last point)
    assert _run_value(rising, "final_gold") == 45
    falls = run([40, 48, 48, 44], [60, 70, 75, 80])
    assert _run_value(falls, "gold_drop") == pytest.approx(4.0)
    assert _run_value(falls, "proxy_hold") == pytest.approx(5.0)  # from the latest of the equal peaks
    flat = [run([40, 40, 40], [60, 70, 80 + s]) for s in range(3)]
    values = {("gpt", "hb", m, "sc_coevo"): {s: _run_value(r, m) for s, r in enumerate(flat)}
              for m in ("gold_drop", "proxy_hold")}
    proxy_claim = next(c for c in load_claims() if c.id == "sc_coevo_proxy_stays_high")
    assert evaluate_claim(proxy_claim, TableEvidence(values)).verdict == CONTRADICTED  # gold never fell
