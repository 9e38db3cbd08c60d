"""Hardening, round four (issue 26, items 3, 4, 5, 8, 11-15): each a case found by the adversarial pass,
fixed, and listed in docs/reliability.md ("Round four")."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app

runner = CliRunner()


def one_line(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture(scope="module")
def toy_url():
    pytest.importorskip("uvicorn")
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_server

    with serve_app(toy_server().app()) as url:
        yield f"{url}/v1"


# ---- 8: absurd sizes --------------------------------------------------------------------------------
@pytest.mark.parametrize(("item", "key", "span"), [
    ("hyper.steps=1000000000", "hyper.steps", "between 0 and 10000"),
    ("hyper.steps=100000000000000000000000000", "hyper.steps", "between 0 and 10000"),
    ("hyper.rollouts=1000000000", "hyper.rollouts", "between 2 and 256"),
    ("hyper.audit_every=100000000", "hyper.audit_every", "between 1 and 1000"),
])
def test_an_absurd_size_is_refused_naming_its_key_and_range(item: str, key: str, span: str, tmp_path: Path) -> None:
    """Before: `run --set hyper.steps=1000000000 --max-calls 30` spun at 100% CPU in the projection (its
    chain kept a state per step of the last round) until killed."""
    started = time.monotonic()
    result = runner.invoke(app, ["run", "--set", item, "--max-calls", "30", "--base-url", "http://127.0.0.1:9/v1",
                                 "--model", "toy", "--runs-root", str(tmp_path), "--name", "r"])
    assert result.exit_code == 2, result.output
    assert f"{key}: out of range; it must be {span}" in one_line(result.output)
    assert time.monotonic() - started < 10 and not (tmp_path / "r").exists()


def test_the_largest_run_stops_at_its_budget_with_no_work_sized_by_it(tmp_path: Path, toy_url: str) -> None:
    """The maxima themselves: 10,000 steps × a budget-matched cap of 1,000 (10^7 planned steps) with
    `--max-calls 30` ends on its budget in seconds; the projection follows its chain for at most 1,024 steps."""
    from decoevo.engine.estimate import expected_rounds
    from decoevo.testing.toy_server import toy_run_args, write_toy_questions

    started = time.monotonic()
    assert expected_rounds(10**7, 6, 4, 0.5, "since_last_round") > 10**6
    assert time.monotonic() - started < 5
    data = write_toy_questions(tmp_path / "toy.jsonl", n=16)
    args = toy_run_args(toy_url, data, tmp_path / "runs", "big", steps=10_000,
                        sets=("method=budget_matched", "hyper.budget_step_cap=1000", "budget.top_up=true"))
    started = time.monotonic()
    result = runner.invoke(app, [*args, "--max-calls", "30"])
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 30
    calls = (tmp_path / "runs" / "big" / "calls.jsonl").read_text().splitlines()
    assert 0 < len([c for c in calls if not json.loads(c)["cached"]]) <= 30
