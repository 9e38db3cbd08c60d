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
