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


def test_the_comparison_with_always_co_evolving_counts_only_the_worlds_the_rule_keeps_the_rubric_in():
    # said co-evolve in 3 wins and 2 ties (both rules agree there); kept the rubric in 5 ties: right 5 times where
    # always co-evolving is wrong, never the reverse: p = 0.5 ** 5
    pairs = [(True, True)] * 3 + [(True, False)] * 2 + [(False, False)] * 5
    assert advice_fit.against_always(pairs) == 0.0312
    m = advice_fit.scored(pairs)
    assert (m["right"], m["always_right"], m["mcnemar_p"]) == (8, 3, 0.0312)
    # one kept world was a win: 5 of 6 discordant worlds for the rule, P(X >= 5 | n = 6) = 7/64
    assert advice_fit.against_always([*pairs, (False, True)]) == 0.109
    assert advice_fit.against_always([(True, True), (True, False)]) is None  # it is always co-evolving
    # against never co-evolving: only the 5 co-evolve worlds count, 3 of them wins: P(X >= 3 | 5) = 1/2
    assert advice_fit.against_always(pairs, always=False) == 0.5


def _transfer_file(worlds: dict[int, tuple[str, list[tuple[float, bool]]]]) -> dict:
    return _results(worlds) | {"prior_name": "transfer"}


def test_the_transfer_test_measures_rules_chosen_on_the_first_prior_on_the_second_ones_worlds():
    fit_worlds = _results({1: _world(0.2, True), 2: _world(0.3, True), 3: _world(0.8, False), 4: _world(0.9, False)})
    reported = _results({5: _world(0.1, True), 6: _world(0.25, True), 7: _world(0.85, False), 8: _world(0.95, False)})
    # the second prior: low adequacy where co-evolving ties (decoys), high where it wins
    second = _transfer_file({9: _world(0.1, False), 10: _world(0.2, False),
                             11: _world(0.9, True), 12: _world(0.8, True)})
    t = advice_fit.transfer(reported, fit_worlds, second)
    assert [r["key"] for r in t["rules"]] == ["stated", "fitted", "refitted"] and t["transfers"] == []
    fitted = t["rules"][1]
    assert fitted["first_prior"]["per_world"]["right"] == 4  # where it was fitted, it separates
    c = fitted["transfer"]["per_world"]
    assert (c["right"], c["always_right"], c["mcnemar_p"]) == (0, 2, 1.0)  # on the second prior it is wrong everywhere
    note = advice_fit.signals_note(t)
    assert note["signals"][1]["transfer"]["right"] == 0 and note["signals"][2]["first_prior"] is None
    assert "None of them beat both always and never co-evolving" in advice_fit.transfer_verdict(t)
    with pytest.raises(ValueError, match="second prior"):
        advice_fit.transfer(reported, fit_worlds, reported)
    with pytest.raises(ValueError, match="among the transfer worlds"):
        advice_fit.transfer(reported, fit_worlds, _transfer_file({5: _world(0.1, True)}))


def test_beating_always_co_evolving_where_it_never_wins_is_no_signal():
    fit_worlds = _results({1: _world(0.2, True), 2: _world(0.3, True), 3: _world(0.8, False), 4: _world(0.9, False)})
    reported = _results({5: _world(0.1, True), 6: _world(0.95, False)})
    # six second-prior worlds, no win: a rule that keeps the rubric everywhere beats always co-evolving (p = 1/64)
    # only because it says the other constant, never co-evolving, which it cannot beat
    second = _transfer_file({w: _world(0.9, False) for w in range(20, 26)})
    t = advice_fit.transfer(reported, fit_worlds, second)
    c = t["rules"][1]["transfer"]["per_world"]
    assert (c["right"], c["mcnemar_p"], c["never_mcnemar_p"]) == (6, 0.0156, None)
    assert t["transfers"] == []


def test_the_pilot_recommends_nothing_when_no_reading_transferred():
    from decoevo.analysis.coevolve_advice import pilot_note

    c = {"n": 24, "right": 9, "accuracy_ci": [0.21, 0.57], "always_right": 15, "mcnemar_p": 0.98,
         "never_mcnemar_p": None}
    measured = {"first_worlds": "200–223", "transfer_worlds": "500–523", "transfer_seeds": 5, "transfers": [],
                "signals": [{"rule": "co-evolve when `adequacy` < 0.5416", "chosen_on": "fitted on worlds 300–323",
                             "first_prior": c | {"right": 18}, "transfer": c}]}
    text = pilot_note(measured)
    assert text.startswith("co-evolve or keep the rubric fixed: no recommendation.")
    assert "right in 18 of 24 held-out worlds 200–223" in text and "right in 9 of 24 worlds 500–523" in text
    assert ("always co-evolving 15, one-sided exact McNemar p = 0.98; never co-evolving 9, it always said keep "
            "the rubric)") in text
    assert "precision" not in text and "recall" not in text
    said = pilot_note(measured | {"transfers": ["fitted"]})
    assert "no recommendation" not in said and "only the fitted rule beat both always and never co-evolving" in said


def test_what_the_pilot_prints_is_the_transfer_test_of_the_stored_results():
    import json

    from bench._common import RESULTS
    from decoevo.analysis.coevolve_advice import MEASURED, pilot_note

    reported = json.loads((RESULTS / "mechanism_prior.json").read_text(encoding="utf-8"))
    transferred = advice_fit.load_transfer()
    assert transferred is not None, "the transfer test's results: bench/results/mechanism_prior_transfer.json"
    t = advice_fit.transfer(reported, advice_fit.load_fit(), transferred)
    assert advice_fit.signals_note(t) == MEASURED
    text = " ".join(pilot_note().split())
    assert ("no recommendation" in text) == (not t["transfers"])
    for r in t["rules"]:
        c = r["transfer"]["per_world"]
        assert f"right in {c['right']} of {c['n']} worlds {t['worlds']}" in text
