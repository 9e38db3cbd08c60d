"""Hand-worked cases for the evaluation statistics (decoevo.analysis.stats)."""

from __future__ import annotations

import dataclasses
import itertools
import math

import pytest
from scipy import stats as sp

from decoevo.analysis.stats import (
    HolmResult,
    MeanStd,
    holm,
    mean_std,
    paired_difference,
    per_run_average,
    relative_gain,
)

# ---- mean_std ----------------------------------------------------------------------------------


def test_mean_std_uses_sample_std():
    r = mean_std([61.6, 61.7, 61.8])  # deviations ±0.1, 0 → SS = 0.02, /(n−1) = 0.01
    assert r.n == 3
    assert r.mean == pytest.approx(61.7)
    assert r.std == pytest.approx(0.1)
    r = mean_std([1, 2, 3, 4])  # SS = 5, /3
    assert r.std == pytest.approx(math.sqrt(5 / 3))


def test_mean_std_single_value_has_no_std():
    r = mean_std([42.0])
    assert r == MeanStd(n=1, mean=42.0, std=None)
    assert r.format() == "42.0"


def test_mean_std_identical_values_std_zero():
    assert mean_std([5.0, 5.0, 5.0]).std == 0.0


def test_mean_std_format_and_errors():
    assert mean_std([61.6, 61.7, 61.8]).format() == "61.7±0.10"
    assert mean_std([61.6, 61.7, 61.8]).format(2, 3) == "61.70±0.100"
    with pytest.raises(ValueError, match="no values"):
        mean_std([])
    with pytest.raises(ValueError, match="non-finite"):
        mean_std([1.0, float("nan")])


def test_results_are_frozen():
    r = mean_std([1.0, 2.0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.mean = 3.0  # type: ignore[misc]


# ---- paired_difference -------------------------------------------------------------------------

DECO = {0: 64.8, 1: 64.6, 2: 65.0}
SKILLOPT = {0: 61.7, 1: 61.8, 2: 61.6}


def test_paired_difference_three_seeds_by_hand():
    # differences 3.1, 2.8, 3.4: mean 3.1; deviations 0, −0.3, +0.3 → SS 0.18, var 0.09, sd 0.3.
    # With 2 dof the t quantile has a closed form, t_p = (2p − 1) / sqrt(2p(1 − p)):
    # t_0.975 = 0.95 / sqrt(0.04875) = 4.302653; half-width = 4.302653 · 0.3 / sqrt(3) = 0.745241.
    r = paired_difference(DECO, SKILLOPT)
    assert r.n == 3 and r.dof == 2 and r.seeds == (0, 1, 2)
    assert r.mean_diff == pytest.approx(3.1)
    assert r.std_diff == pytest.approx(0.3)
    q = 0.95 / math.sqrt(2 * 0.975 * 0.025)
    assert q == pytest.approx(4.302653, abs=1e-6)
    assert q == pytest.approx(sp.t.ppf(0.975, 2))
    assert r.ci_low == pytest.approx(3.1 - 0.745241, abs=1e-6)
    assert r.ci_high == pytest.approx(3.1 + 0.745241, abs=1e-6)
    # t = 3.1 / (0.3 / sqrt 3) = 17.897858; for 2 dof the two-sided p = 1 − t / sqrt(t² + 2)
    # = 1 − 17.897858 / sqrt(322.3333) = 1 − 0.996893 = 0.003107.
    t = 3.1 * math.sqrt(3) / 0.3
    assert r.t_stat == pytest.approx(t)
    assert r.p_value == pytest.approx(1 - t / math.sqrt(t * t + 2), rel=1e-9)
    assert r.p_value == pytest.approx(0.003107, abs=1e-6)
    assert r.significant is True and r.reason is None


def test_paired_difference_is_signed_and_matches_scipy():
    a = {"s1": 40.2, "s2": 41.9, "s3": 39.5, "s4": 42.0, "s5": 40.8}
    b = {"s1": 40.0, "s2": 41.0, "s3": 40.1, "s4": 41.2, "s5": 40.9}
    r = paired_difference(a, b)
    ref = sp.ttest_rel([a[k] for k in sorted(a)], [b[k] for k in sorted(b)])
    assert r.p_value == pytest.approx(ref.pvalue)
    assert r.t_stat == pytest.approx(ref.statistic)
    rev = paired_difference(b, a)
    assert rev.mean_diff == pytest.approx(-r.mean_diff)
    assert rev.ci_low == pytest.approx(-r.ci_high) and rev.p_value == pytest.approx(r.p_value)
    assert r.ci_low < 0 < r.ci_high and r.significant is False


def test_paired_difference_matches_by_seed_not_order():
    shuffled = {2: 61.6, 0: 61.7, 1: 61.8}
    assert paired_difference(DECO, shuffled) == paired_difference(DECO, SKILLOPT)


def test_paired_difference_wider_confidence_widens_ci():
    r90, r99 = paired_difference(DECO, SKILLOPT, 0.90), paired_difference(DECO, SKILLOPT, 0.99)
    assert r99.ci_low < r90.ci_low and r99.ci_high > r90.ci_high
    assert r90.p_value == r99.p_value


def test_paired_difference_names_missing_seeds():
    with pytest.raises(ValueError, match=r"missing from b: \[2\]; missing from a: \[7\]"):
        paired_difference(DECO, {0: 1.0, 1: 2.0, 7: 3.0})


def test_paired_difference_single_seed_gives_reason():
    r = paired_difference({0: 50.0}, {0: 48.0})
    assert r.n == 1 and r.mean_diff == 2.0
    assert r.std_diff is None and r.ci_low is None and r.ci_high is None and r.p_value is None
    assert r.significant is None
    assert "at least 2" in (r.reason or "")


def test_paired_difference_identical_runs():
    r = paired_difference(SKILLOPT, dict(SKILLOPT))
    assert r.mean_diff == 0.0 and r.std_diff == 0.0
    assert (r.ci_low, r.ci_high) == (0.0, 0.0)
    assert r.p_value == 1.0 and r.reason == "all differences are zero"


def test_paired_difference_constant_shift():
    r = paired_difference({0: 3.0, 1: 4.0}, {0: 1.0, 1: 2.0})
    assert r.std_diff == 0.0 and (r.ci_low, r.ci_high) == (2.0, 2.0)
    assert r.p_value == 0.0 and r.t_stat == math.inf and "zero variance" in (r.reason or "")


def test_paired_difference_input_errors():
    with pytest.raises(ValueError, match="no seeds"):
        paired_difference({}, {})
    with pytest.raises(ValueError, match="confidence"):
        paired_difference(DECO, SKILLOPT, confidence=95)
    with pytest.raises(ValueError, match="non-finite"):
        paired_difference({0: float("inf"), 1: 1.0}, {0: 1.0, 1: 1.0})


# ---- holm --------------------------------------------------------------------------------------


def test_holm_three_pvalues_known_answer():
    # sorted: A 0.01·3 = 0.03, C 0.03·2 = 0.06, B max(0.06, 0.04·1) = 0.06
    r = holm({"A": 0.01, "B": 0.04, "C": 0.03})
    assert list(r) == ["A", "B", "C"]
    assert r["A"] == HolmResult(p_value=0.01, adjusted=pytest.approx(0.03), reject=True, rank=1, alpha=0.05)
    assert r["C"].adjusted == pytest.approx(0.06) and r["C"].rank == 2 and not r["C"].reject
    assert r["B"].adjusted == pytest.approx(0.06) and r["B"].rank == 3 and not r["B"].reject


def test_holm_all_rejected():
    # 0.005 ≤ .05/4, 0.011 ≤ .05/3, 0.02 ≤ .05/2, 0.04 ≤ .05
    r = holm({"x": 0.005, "y": 0.011, "z": 0.02, "w": 0.04})
    assert all(v.reject for v in r.values())
    assert [r[k].adjusted for k in "xyzw"] == pytest.approx([0.02, 0.033, 0.04, 0.04])


def test_holm_step_down_stops_at_first_acceptance():
    # c alone would pass 0.045 ≤ 0.05, but b failed (0.04 > 0.025) so testing stops there
    r = holm({"a": 0.001, "b": 0.04, "c": 0.045})
    assert [r[k].reject for k in "abc"] == [True, False, False]
    assert r["c"].adjusted == pytest.approx(0.08)  # monotone: max(0.08, 0.045)


def test_holm_capped_at_one_and_monotone():
    r = holm({"a": 0.6, "b": 0.7, "c": 0.2})
    assert r["c"].adjusted == pytest.approx(0.6)
    assert r["a"].adjusted == 1.0 and r["b"].adjusted == 1.0
    ordered = sorted(r.values(), key=lambda h: h.rank)
    assert all(x.adjusted <= y.adjusted for x, y in itertools.pairwise(ordered))


def test_holm_single_and_empty_and_errors():
    assert holm({"only": 0.03})["only"].adjusted == 0.03
    assert holm({}) == {}
    with pytest.raises(ValueError, match="'bad'"):
        holm({"bad": 1.5})
    with pytest.raises(ValueError):
        holm({"nan": float("nan")})
    with pytest.raises(ValueError, match="alpha"):
        holm({"a": 0.1}, alpha=0)


# ---- relative gain and per-run average ---------------------------------------------------------


def test_relative_gain_matches_paper_rows():
    assert relative_gain(64.8, 61.7) == pytest.approx(5.02, abs=0.01)  # GPT-4o row: 5.0%
    assert relative_gain(62.1, 60.4) == pytest.approx(2.81, abs=0.01)
    assert relative_gain(50.0, 50.0) == 0.0
    assert relative_gain(45.0, 50.0) == pytest.approx(-10.0)
    with pytest.raises(ValueError, match="positive"):
        relative_gain(1.0, 0.0)


def test_per_run_average_is_unweighted_within_run():
    assert per_run_average({"healthbench": 40.0, "writingbench": 70.0, "researchqa": 55.0}) == pytest.approx(55.0)
    # averaging within each run, then over seeds, is what the paper's "Avg." column is
    runs = [{"h": 40.0, "w": 70.0}, {"h": 42.0, "w": 74.0}]
    agg = mean_std(per_run_average(r) for r in runs)
    assert agg.mean == pytest.approx(56.5) and agg.std == pytest.approx(math.sqrt(4.5))


def test_per_run_average_checks_benchmark_set():
    assert per_run_average({"h": 1.0, "w": 3.0}, benchmarks=["w", "h"]) == 2.0
    with pytest.raises(ValueError, match=r"missing \['r'\], unexpected \['x'\]"):
        per_run_average({"h": 1.0, "x": 2.0}, benchmarks=["h", "r"])
    with pytest.raises(ValueError, match="no benchmark"):
        per_run_average({})


def test_coverage_and_the_questions_graded_in_both():
    from decoevo.analysis import Coverage, graded_in_both

    assert graded_in_both({"a": 1.0, "b": None, "c": 0.0}, {"a": 2.0, "b": 3.0, "c": 5.0, "d": 1.0}) == {"a", "c"}
    assert graded_in_both({"a": None}, {"a": None}) == frozenset()
    assert Coverage(19, 20).low is False and Coverage(18, 20).low is True  # 95% exactly is enough
    assert Coverage(0, 0).low is False and Coverage(0, 0).fraction is None and Coverage(0, 3).low
    assert (Coverage(18, 20) + Coverage(20, 20)).format() == "38/40"
