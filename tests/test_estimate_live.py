"""The expected paid calls a run shows (issue 34 item 7): before the run a prior, then re-estimated by the
progress line after each step and round from the run's own outcomes (engine/reestimate.py). On the README's
toy run, whose rewrites after the first acceptance are copies of the current skill (invalid, never gated)
and whose rounds are settled by the structural objective, the estimate before the run is far over what it
pays; from half its steps on, the progress line's re-estimate is within a quarter of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.cli.replay_estimate import expected_by_event
from decoevo.engine.estimate import Rates, estimate_calls
from decoevo.engine.reestimate import Position, Seen, calls_ahead, seen_rates
from decoevo.methods import get_method
from decoevo.presets import PRESETS
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_server


def _toy_run(tmp_path: Path, steps: int) -> Path:
    with serve_app(toy_server().app()) as url:  # the README's toy command, with more steps
        out = CliRunner().invoke(app, ["run", "--base-url", f"{url}/v1", "--model", "toy", "--steps", str(steps),
                                       "--runs-root", str(tmp_path / "runs")],
                                 env={"DECOEVO_CACHE": str(tmp_path / "cache.sqlite"), "COLUMNS": "120"})
    assert out.exit_code == 0, out.output
    (run,) = (tmp_path / "runs").iterdir()
    return run


def test_the_progress_line_re_estimates_a_toy_run_within_a_quarter_of_its_paid_calls(tmp_path: Path) -> None:
    run = _toy_run(tmp_path, 4)
    rows = expected_by_event(run)
    paid = sum(r["calls"] for r in json.loads((run / "ledger.json").read_text())["rows"])
    assert rows[-1]["paid"] == paid  # the replay saw every paid call
    invalid = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
    assert sum(e.get("outcome") == "invalid" for e in invalid) >= 2  # what the prior cannot know
    # before the run: the prior, which assumes every rewrite is gated (the old estimate, unchanged)
    assert rows[0]["expected"] > 1.25 * paid
    half = next(i for i, r in enumerate(rows) if r["after"] == "step 1") + 1  # from half the steps on
    late = rows[half:]
    assert len(late) >= 3
    for row in late:
        assert abs(row["expected"] / paid - 1) <= 0.25, (row, paid, rows)
    assert rows[-1]["expected"] == paid  # once the run has ended, what it paid


def test_an_invalid_step_lowers_the_calls_ahead_and_the_prior_is_unchanged() -> None:
    """Pure: a step whose rewrite was invalid moves the ungated share from the prior's 0 toward 1, which
    takes the V_s scoring out of the steps ahead; with nothing seen the re-estimate is the estimate's."""
    raw = {"method": "decoevo", "seed": 0, "data": {"path": "x.jsonl"}, **PRESETS["quick"]}
    from decoevo.engine.config import config_from_dict

    config = config_from_dict({**raw, "hyper": {**raw["hyper"], "steps": 6}})
    method, h, sizes = get_method("decoevo"), config.hyper, config.splits
    start = Position(0)
    assert calls_ahead(method, h, sizes, 0, Seen(), start) == pytest.approx(
        estimate_calls(method, h, sizes, seed=0).expected, abs=1.0)
    at = Position.after_step(2, 0, 1, method, h)  # after step 2, whose round came after step 1
    gated = calls_ahead(method, h, sizes, 0, Seen(steps=3, kept=3, rounds=1, round_calls=9), at)
    invalid = calls_ahead(method, h, sizes, 0, Seen(steps=3, kept=3, ungated=2, rounds=1, round_calls=9), at)
    assert invalid < gated - 3  # the ungated share 0 -> 0.5: half of 3 steps' V_s scoring (4 calls each)
    assert calls_ahead(method, h, sizes, 0, Seen(steps=3, kept=3, ungated=2, rounds=1, round_calls=9),
                       Position(6)) == 0.0  # nothing ahead after the last step and round
    assert seen_rates(Seen(steps=3, ungated=3)).ungated == pytest.approx(0.75)  # prior 0 weighs one step
    # the high estimate still assumes every rewrite gated
    assert estimate_calls(method, h, sizes, rates=Rates(ungated=1.0)).upper_bound == \
        estimate_calls(method, h, sizes).upper_bound


def test_each_share_and_the_rounds_cost_the_run_shows_move_the_re_estimate_off_the_prior() -> None:
    """Issue 46.2: a re-estimate that kept the prior whatever the run showed survived the suite (only the
    ungated share was checked). Each measured share is the prior counted as one observation plus the run's
    own, and the calls ahead follow each of them and what the ended rounds paid."""
    from dataclasses import replace

    from decoevo.engine.config import config_from_dict, deep_merge
    from decoevo.engine.estimate import expected_rounds
    from decoevo.engine.reestimate import PRIOR_WEIGHT, prior_for

    method = get_method("decoevo")
    prior = prior_for(method)
    assert (prior.reject, prior.generator_invalid, prior.generator_accept) == (0.8, 0.0, 0.1)
    # nothing seen: the prior (the generator's acceptance left to its rule's, the same 0.1)
    assert replace(seen_rates(Seen(), prior), generator_accept=0.1) == prior
    shown = seen_rates(Seen(steps=4, kept=0, rounds=3, invalid_generators=3, generator_accepts=0), prior)
    assert shown.reject == pytest.approx(0.8 / 5) and shown.generator_invalid == pytest.approx(3 / 4)
    assert shown.generator_accept == pytest.approx(0.1 / 4)
    assert seen_rates(Seen(steps=4, kept=4), prior).reject == pytest.approx(4.8 / 5)
    assert seen_rates(Seen(rounds=3, generator_accepts=3), prior).generator_accept == pytest.approx(3.1 / 4)

    config = config_from_dict(deep_merge(PRESETS["paper"], {"method": "decoevo", "data": {"path": "x.jsonl"}}))
    h, sizes = config.hyper, config.splits
    at = Position.after_step(7, 0, 5, method, h)  # after step 7, whose last round came after step 5

    def ahead(**seen: int) -> float:
        return calls_ahead(method, h, sizes, 0, Seen(**{"steps": 8, "kept": 4, "rounds": 1, "round_calls": 60,
                                                        **seen}), at)

    base = ahead()
    assert ahead(kept=8) != base and ahead(kept=0) != base  # the gate's rejections: rounds and repeats ahead
    assert ahead(invalid_generators=1) < base  # an invalid generator rewrite is never verified
    assert ahead(generator_accepts=1) > base  # an accepted one writes new rubrics
    # what the ended rounds paid moves the cost of each round ahead halfway from the prior's (weight 1 : 1)
    rate = seen_rates(Seen(steps=8, kept=4, rounds=1), prior).reject
    rounds = expected_rounds(20, h.audit_every, h.max_stalls, rate, h.audit_schedule, start=8, stalls=0, since=2)
    assert rounds > 1
    assert ahead(round_calls=400) - base == pytest.approx((400 - 60) / (PRIOR_WEIGHT + 1) * rounds)


@pytest.mark.parametrize("preset", ["quick", "paper"])
def test_before_any_step_the_re_estimate_is_the_estimate_under_either_schedule(preset: str) -> None:
    """A run not started yet has had no round (`Position`'s last round defaults to -1, none): under the
    paper preset's `since_last_round` schedule, whose K steps count from the last round, the calls ahead
    are then the estimate's. Counting from a round at step 0 would move every scheduled round one step later
    (issue 46.2: that default changed to 0 survived the mutation bench; only the fixed schedule was checked)."""
    from decoevo.engine.config import config_from_dict, deep_merge

    config = config_from_dict(deep_merge(PRESETS[preset], {"method": "decoevo", "data": {"path": "x.jsonl"}}))
    method, h, sizes = get_method("decoevo"), config.hyper, config.splits
    assert h.audit_schedule == ("since_last_round" if preset == "paper" else "fixed")
    assert calls_ahead(method, h, sizes, 0, Seen(), Position(0)) == pytest.approx(
        estimate_calls(method, h, sizes, seed=0).expected, abs=1.0)
