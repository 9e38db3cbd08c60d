"""Dollars end to end: `--max-cost` stops a run cleanly, the summary and progress carry the cost, a cost
budget without a price is refused up front, and calls paid before a kill keep their cost on resume."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.lm import LM, Budget, LMConfig, ModelSpec, RequestCache
from decoevo.rundir import RunReader
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions
from tests.engine_helpers import toy_engine

runner = CliRunner()
PRICES = ("lm.models.default.input_price_per_mtok=100", "lm.models.default.output_price_per_mtok=300",
          "splits.test=0", "lm.models.default.max_concurrency=1")  # one call in flight: the bound is exact


def test_max_cost_stops_the_run_and_the_summary_says_what_it_cost(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        result = runner.invoke(app, [*toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=3, sets=PRICES),
                                     "--max-cost", "1.5"])
    assert result.exit_code == 0, result.output
    reader = RunReader(tmp_path / "runs" / "r")
    summary = reader.summary()
    assert summary is not None and summary.status == "budget_stop" and "cost budget" in (summary.stopped or "")
    spent = summary.usage["effective_cost_usd"]
    paid = [c for c in reader.calls() if not c.cached]
    expected = sum(c.prompt_tokens * 100 + c.completion_tokens * 300 for c in paid) / 1e6
    # a hard cap (issue 35): never past it; each request holds its worst case (its whole max_tokens) until it is
    # answered, so the run stops within a worst case of the cap
    assert spent == pytest.approx(expected) and 0.3 < spent <= 1.5, spent
    assert "$" in result.output  # the progress bar and the usage table show dollars
    from decoevo.analysis.costs import load_run_usage
    from decoevo.report import build_report
    from decoevo.report.render import render

    assert load_run_usage(tmp_path / "runs" / "r").total.effective_cost_usd == pytest.approx(spent)
    html = " ".join(render(build_report([tmp_path / "runs" / "r"])).split())
    assert ">dollars</th>" in html and f"${spent:.4f}" in html  # the report's cost table in dollars


def test_a_cost_budget_without_prices_is_refused() -> None:
    spec = ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1")
    lm = LM(LMConfig(models={"default": spec}, use_cache=False))
    with pytest.raises(ValueError, match="needs a price for every model"):
        lm.budget = Budget(max_cost=1.0)


def test_calls_paid_before_a_kill_keep_their_cost_on_resume(tmp_path: Path) -> None:
    class Kill(BaseException):
        pass

    priced = LMConfig(models={"default": ModelSpec(input_price_per_mtok=100.0, output_price_per_mtok=300.0)})
    cache = RequestCache(tmp_path / "c.sqlite")
    engine, _ = toy_engine(tmp_path, "skillopt", run_name="k", cache=cache, steps=2)
    engine.lm.config = priced
    paid = [0]

    def on_call(record, paid=paid):  # type: ignore[no-untyped-def]
        paid[0] += not record.cached
        if paid[0] == 9:
            raise Kill

    engine.on_call = on_call
    with pytest.raises(Kill):
        asyncio.run(engine.run_async())
    again, _ = toy_engine(tmp_path, "skillopt", run_name="k", cache=cache, steps=2)
    again.lm.config = priced
    result = asyncio.run(again.run_async(resume=True))
    calls = [c for c in RunReader(tmp_path / "k").calls() if not c.cached]
    expected = sum(c.prompt_tokens * 100 + c.completion_tokens * 300 for c in calls) / 1e6
    assert result.ledger.total().cost_usd == pytest.approx(expected)
    ledger = json.loads((tmp_path / "k" / "ledger.json").read_text())
    assert ledger["total"]["calls"] == len(calls)


# ---- the mutation bench's survivors in lm/budget.py (docs/reliability.md "Mutation bench") -------------------

def test_calls_in_flight_before_any_answer_are_counted_at_nothing_each() -> None:
    """No call answered yet: there is no average to charge them at, and no division by zero."""
    from decoevo.lm.budget import InFlight, in_flight
    from decoevo.lm.ledger import UsageLedger

    assert in_flight(3, UsageLedger()) == InFlight(3, 0.0, 0.0)


async def test_a_run_cost_hold_holds_its_worst_case_and_refuses_what_cannot_fit() -> None:
    from decoevo.lm.budget import BudgetExceeded, CostHold
    from decoevo.lm.ledger import UsageLedger

    hold, ledger = CostHold(), UsageLedger()
    assert await hold.reserve(ledger, 1.0, 0.4) == 0.4 and hold.held == 0.4
    with pytest.raises(BudgetExceeded, match=r"up to \$0\.4000 in flight"):
        await hold.reserve(ledger, 1.0, 1.5)  # even were the hold to settle at nothing, 1.5 > 1.0
    hold.release(0.4)
    assert hold.held == 0.0


def test_a_cap_stop_on_a_cache_hit_says_the_cache_answered_and_shows_a_tiny_cap(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`--max-cost 1e-300` after a run of the same questions: the first request is a cache hit whose price
    counts (the cap is what the run would cost alone). The stop read "$14.0000 of $0.0000 used", as if the
    hit had been paid and no cap given; it names the cache's share and the cap as given."""
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        first = runner.invoke(app, toy_run_args(f"{url}/v1", data, tmp_path / "runs", "a", steps=1, sets=PRICES))
        assert first.exit_code == 0, first.output
        result = runner.invoke(app, [*toy_run_args(f"{url}/v1", data, tmp_path / "runs", "b", steps=1, sets=PRICES),
                                     "--max-cost", "1e-300"])
    assert result.exit_code == 0, result.output
    summary = RunReader(tmp_path / "runs" / "b").summary()
    assert summary is not None and summary.status == "budget_stop", result.output
    stopped = summary.stopped or ""
    assert "of $1e-300 used" in stopped and "answered by the cache, counted at its price" in stopped, stopped
    assert "$0.0000 used" not in " ".join(result.output.split()), result.output
