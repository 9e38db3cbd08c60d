"""The gold-free advice is fitted on some of the prior's worlds and measured on others
(bench/mechanism/advice_fit.py), and what `decoevo pilot` prints is what that measured."""

from __future__ import annotations

import pytest

from bench.mechanism import advice_fit


def _results(worlds: dict[int, tuple[str, list[tuple[float, bool]]]]) -> dict:
    """A results file: per world its verdict and, per seed, the run's adequacy and whether DecoEvo beat SkillOpt."""
    cells, rows = [], {}
    for w, (verdict, runs) in worlds.items():
        rows[str(w)] = {"decoevo-skillopt": {"verdict": verdict}}
        for seed, (adequacy, better) in enumerate(runs):
            audits = {"adequacy": adequacy, "new_structural": 1, "new_contrastive": 0, "repairs": 2,
                      "principles": 1, "contrastive_records": 3}
            cells += [{"world": w, "seed": seed, "method": "skillopt", "gold": 50.0},
                      {"world": w, "seed": seed, "method": "decoevo", "gold": 60.0 if better else 50.0,
                       "audits": audits}]
    return {"cells": cells, "summary": {"worlds": rows}}


def _world(adequacy: float, wins: bool) -> tuple[str, list[tuple[float, bool]]]:
    return ("win" if wins else "tie", [(adequacy + 0.01 * k, wins) for k in range(3)])


def test_the_fitted_rule_is_the_reading_that_separates_the_fit_worlds_and_is_measured_on_others():
    fit_worlds = _results({1: _world(0.2, True), 2: _world(0.3, True), 3: _world(0.8, False), 4: _world(0.9, False)})
    rule, score = advice_fit.fit(fit_worlds)
    assert (rule.reading, rule.above, score) == ("adequacy", False, 1.0) and 0.32 < rule.threshold < 0.8
    # held out: one world the rule gets wrong (low adequacy, no win), three right
    held = _results({5: _world(0.1, True), 6: _world(0.25, False), 7: _world(0.85, False), 8: _world(0.95, False)})
    m = advice_fit.measure(rule.says, held)["per_world"]
    assert (m["n"], m["right"], m["flagged"], m["true_positives"]) == (4, 3, 2, 1)
    assert m["constant_accuracy"] == 0.75 and not m["beats_chance"]  # 3/4 is what "never co-evolve" gets


def test_a_world_fitted_on_is_never_reported():
    both = _results({1: _world(0.2, True), 2: _world(0.9, False)})
    with pytest.raises(ValueError, match=r"both fitted on and reported"):
        advice_fit.evaluate(both, both)


def test_advice_that_does_not_beat_chance_says_so():
    fit_worlds = _results({1: _world(0.2, True), 2: _world(0.9, False)})
    held = _results({5: _world(0.1, False), 6: _world(0.95, True), 7: _world(0.15, True), 8: _world(0.9, False)})
    text = advice_fit.verdict(advice_fit.evaluate(held, fit_worlds))
    assert "no gold-free advice measured here beats chance" in text and "right in 2 of 4" in text


def test_what_the_pilot_prints_is_what_the_held_out_worlds_measured():
    import json

    from bench._common import RESULTS
    from decoevo.analysis.coevolve_advice import HELD_OUT, pilot_note

    reported = json.loads((RESULTS / "mechanism_prior.json").read_text(encoding="utf-8"))
    evaluated = advice_fit.evaluate(reported, advice_fit.load_fit())
    if "fitted" not in evaluated:
        assert HELD_OUT == {} and "no gold-free advice has been measured yet" in pilot_note()
        return
    m = evaluated["fitted"]["reported"]["per_world"]
    assert advice_fit.held_out_note(evaluated["fitted"], reported) == HELD_OUT
    assert f"right in {m['right']} of {m['n']}" in pilot_note()
    assert ("no gold-free advice beat chance" in pilot_note()) == (not m["beats_chance"])
