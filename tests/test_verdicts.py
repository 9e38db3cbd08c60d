"""One verdict rule for the mechanism pages (bench/mechanism/verdicts.py): the verdict is read from the interval
printed beside it, and in a Holm family that interval excludes 0 exactly when Holm rejects (issue 48.2)."""

from __future__ import annotations

import json
import random
import re

import pytest

from bench._common import RESULTS
from bench.mechanism import advice, doc, verdicts
from decoevo.analysis.stats import holm, paired_difference


@pytest.mark.parametrize(("low", "high", "expected"), [
    (-25.3, -1.9, "loss"),  # issue 48.2: "−13.6 [−25.3, −1.9] … tie" was a loss printed as a tie
    (0.4, 5.8, "win"),
    (-1.0, 2.0, "tie"),
    (0.0, 3.0, "tie"),  # touching 0 is not above it
    (-3.0, 0.0, "tie"),
    (None, None, "not run"),
])
def test_the_verdict_is_read_from_the_interval(low, high, expected):
    assert verdicts.decide(low, high) == expected


def test_a_margin_widens_the_tie():
    assert verdicts.decide(0.5, 2.0, margin=1.0) == "tie"
    assert verdicts.decide(1.5, 2.0, margin=1.0) == "win"
    assert verdicts.decide(-2.0, -1.5, margin=1.0) == "loss"


def test_a_holm_interval_excludes_zero_exactly_when_holm_rejects():
    rng = random.Random(7)
    seen = set()
    for _ in range(40):
        m = rng.randint(2, 12)
        pairs = {}
        for k in range(m):
            shift = rng.choice([0.0, 0.5, 2.0, -2.0, 6.0])
            base = [rng.gauss(50, 5) for _ in range(rng.randint(3, 12))]
            pairs[k] = ({s: b + shift + rng.gauss(0, 2) for s, b in enumerate(base)}, dict(enumerate(base)))
        fam = verdicts.family(pairs)
        plain = {k: paired_difference(*p).p_value for k, p in pairs.items()}
        rejected = {k: r.reject for k, r in holm(plain).items()}
        for k, (t, _) in fam.items():
            assert (verdicts.of(t) in ("win", "loss")) == rejected[k], (m, k)
            seen.add(rejected[k])
    assert seen == {True, False}  # both sides were exercised


def test_significant_alone_is_a_tie_in_a_larger_family():
    a = [10.0, 12.0, 11.0, 13.0, 9.0]
    z = [v + 1.5 + (0.9 if k % 2 else -0.9) for k, v in enumerate(a)]
    pair = (dict(enumerate(z)), dict(enumerate(a)))
    assert verdicts.of(verdicts.family({"z": pair})["z"][0]) == "win"
    crowd = verdicts.family({"z": pair, **{f"extra{k}": pair for k in range(6)}})
    t = crowd["z"][0]
    assert t is not None and t.ci_low < 0 < t.ci_high and verdicts.of(t) == "tie"


def _cells(setting, golds):
    return [{"setting": setting, "method": m, "seed": s, "gold": g}
            for m, gs in golds.items() for s, g in enumerate(gs)]


def _results():
    results = json.loads((RESULTS / "mechanism.json").read_text(encoding="utf-8"))
    prior_path = RESULTS / "mechanism_prior.json"
    return results, json.loads(prior_path.read_text(encoding="utf-8")) if prior_path.is_file() else None


ROW = re.compile(r"([+-]\d+\.\d) \[([+-]\d+\.\d), ([+-]\d+\.\d)\], \d+ seeds, \*\*(\w+)\*\*")


def test_every_advice_row_says_what_its_interval_says():
    """The printed interval and the printed verdict agree on every row of docs/when-to-co-evolve.md."""
    results, _ = _results()
    tests = advice.setting_tests(results)
    checked = 0
    for setting in tests:
        m = ROW.search(advice.row(results, tests, setting))
        assert m, setting
        assert verdicts.decide(float(m.group(2)), float(m.group(3))) == m.group(4), (setting, m.group(0))
        checked += 1
    assert checked > 10


def test_every_sweep_row_of_mechanism_md_says_what_its_interval_says():
    results, _ = _results()
    rows = [r for r in doc.sweep_section(results).splitlines()[2:]]
    assert len(rows) > 10
    for r in rows:
        cols = [c.strip() for c in r.strip("|").split("|")]
        m = re.match(r"[+-]\d+\.\d \[([+-]\d+\.\d), ([+-]\d+\.\d)\]", cols[5])
        assert m, r
        assert verdicts.decide(float(m.group(1)), float(m.group(2))) == cols[7], r


def test_a_setting_whose_interval_lies_below_zero_is_a_loss_on_the_advice_page():
    """A lone setting (a family of one: its 95% interval) clearly below SkillOpt is printed as a loss."""
    sk = [50.0, 55.0, 60.0, 52.0, 58.0]
    de = [40.0, 41.0, 49.0, 37.0, 45.0]
    cells = _cells("sweep:x", {"skillopt": sk, "decoevo": de})
    summary = {"sweep:x": {m: {"gold": {"mean": sum(g) / 5, "n": 5}, "calls": {"mean": c}}
                           for m, g, c in (("skillopt", sk, 100.0), ("decoevo", de, 560.0))}}
    results = {"cells": cells, "summary": summary}
    tests = advice.setting_tests(results)
    assert tests["sweep:x"][1] == "loss"
    line = advice.row(results, tests, "sweep:x")
    assert "**loss**" in line and "5.6× the calls" in line
