"""docs/mechanism.md is what the bench results give (`python -m bench.mechanism.doc`), and its verdicts
come from Holm-corrected paired tests: a claim holds only when the corrected test rejects."""

from __future__ import annotations

import json

import pytest

from bench._common import RESULTS
from bench.mechanism import doc
from bench.mechanism.verdicts import cell_family


def _cells(setting: str, golds: dict[str, list[float]]) -> list[dict]:
    return [{"setting": setting, "method": m, "seed": s, "gold": g}
            for m, gs in golds.items() for s, g in enumerate(gs)]


def test_the_page_is_what_the_results_give():
    results = json.loads((RESULTS / "mechanism.json").read_text(encoding="utf-8"))
    prior_path = RESULTS / "mechanism_prior.json"
    prior = json.loads(prior_path.read_text(encoding="utf-8")) if prior_path.is_file() else None
    assert doc.DOC.read_text(encoding="utf-8") == doc.render(results, prior), "run python -m bench.mechanism.doc"


def test_a_claim_holds_only_when_its_holm_interval_lies_on_the_claimed_side():
    a = [10.0, 12.0, 11.0, 13.0, 9.0]
    cells = _cells("main", {"x": [v + 3 for v in a], "y": a, "z": [v + 1.5 + (0.9 if k % 2 else -0.9)
                                                                   for k, v in enumerate(a)]})
    tests = {m: doc.paired(cells, "main", m, "y") for m in ("x", "z")}
    assert tests["x"] is not None and tests["x"].mean_diff == pytest.approx(3.0)
    both = cell_family(cells, {"x": ("main", "x", "y"), "z": ("main", "z", "y"),
                               **{f"extra{k}": ("main", "z", "y") for k in range(5)}})
    assert doc.verdict(both["x"][0], 1) == "holds"
    assert doc.verdict(both["x"][0], -1) == "reversed"
    # z is significant on its own (p < 0.05) but not once corrected with six other comparisons
    assert tests["z"].p_value < 0.05 and doc.verdict(tests["z"], 1) == "holds"
    assert doc.verdict(both["z"][0], 1) == "not shown" and not doc.corrected(both)["z"][1]


def _results():
    results = json.loads((RESULTS / "mechanism.json").read_text(encoding="utf-8"))
    prior_path = RESULTS / "mechanism_prior.json"
    return results, json.loads(prior_path.read_text(encoding="utf-8")) if prior_path.is_file() else None


def test_the_advice_page_is_what_the_results_give():
    """docs/when-to-co-evolve.md: every number on it is computed from the results files."""
    from bench.mechanism import advice

    results, prior = _results()
    assert advice.PAGE.read_text(encoding="utf-8") == advice.render(results, prior), "run python -m bench.mechanism.doc"


def test_an_advice_row_the_results_do_not_hold_is_an_error_not_a_blank():
    from bench.mechanism import advice

    results, _ = _results()
    with pytest.raises(KeyError, match=r"not in bench/results/mechanism\.json"):
        advice.row(results, advice.setting_tests(results), "sweep:capacity:capacity=2")


def test_the_advice_verdicts_are_the_holm_corrected_tests():
    """A row's verdict word is the sign of its paired difference only when Holm over the sweep rejects."""
    from bench.mechanism import advice

    results, _ = _results()
    for setting, (test, verdict) in advice.setting_tests(results).items():
        if verdict == "win":
            assert test.mean_diff > 0 and test.p_value < 0.05, setting
        elif verdict == "loss":
            assert test.mean_diff < 0 and test.p_value < 0.05, setting


def test_the_drift_flag_shown_in_the_report_is_what_the_prior_measured():
    """The report shows the crowding-out flag's measured precision and recall as a loss predictor: the
    numbers in analysis/criterion_drift.py are those of bench/results/mechanism_prior.json."""
    from decoevo.analysis.criterion_drift import AS_LOSS_PREDICTOR

    _, prior = _results()
    measured = prior["summary"]["drift"]["per_run"]
    assert {"precision": measured["precision"], "recall": measured["recall"],
                                 "runs": measured["n"]} == AS_LOSS_PREDICTOR
