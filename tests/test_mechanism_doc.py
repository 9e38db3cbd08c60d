"""docs/mechanism.md is what the bench results give (`python -m bench.mechanism.doc`), and its verdicts
come from Holm-corrected paired tests: a claim holds only when the corrected test rejects."""

from __future__ import annotations

import json

import pytest

from bench._common import RESULTS
from bench.mechanism import doc


def _cells(setting: str, golds: dict[str, list[float]]) -> list[dict]:
    return [{"setting": setting, "method": m, "seed": s, "gold": g}
            for m, gs in golds.items() for s, g in enumerate(gs)]


def test_the_page_is_what_the_results_give():
    results = json.loads((RESULTS / "mechanism.json").read_text(encoding="utf-8"))
    prior_path = RESULTS / "mechanism_prior.json"
    prior = json.loads(prior_path.read_text(encoding="utf-8")) if prior_path.is_file() else None
    assert doc.DOC.read_text(encoding="utf-8") == doc.render(results, prior), "run python -m bench.mechanism.doc"


def test_a_claim_holds_only_when_the_holm_corrected_test_rejects():
    a = [10.0, 12.0, 11.0, 13.0, 9.0]
    cells = _cells("main", {"x": [v + 3 for v in a], "y": a, "z": [v + 1.5 + (0.9 if k % 2 else -0.9)
                                                                   for k, v in enumerate(a)]})
    tests = {m: doc.paired(cells, "main", m, "y") for m in ("x", "z")}
    assert tests["x"] is not None and tests["x"].mean_diff == pytest.approx(3.0)
    alone = doc.corrected({"z": tests["z"]})
    both = doc.corrected({**tests, **{f"extra{k}": tests["z"] for k in range(5)}})
    assert doc.verdict(tests["x"], both["x"], 1) == "holds"
    assert doc.verdict(tests["x"], both["x"], -1) == "reversed"
    # z is significant on its own (p < 0.05) but not once corrected with six other comparisons
    assert tests["z"].p_value < 0.05 and alone["z"][1]
    assert doc.verdict(tests["z"], both["z"], 1) == "not shown"
