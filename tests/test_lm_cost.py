"""Dollars in the ledger and a cost budget; budgets count the calls in flight."""

from __future__ import annotations

import asyncio

import pytest

from decoevo.engine.config import BudgetConfig
from decoevo.lm import LM, Budget, BudgetExceeded, ConfigError, LMConfig, Message, ModelSpec, UsageLedger
from decoevo.lm.pricing import FREE, Price, litellm_cost_map, price_for, price_from_cost_map
from decoevo.lm.types import BackendRequest, Completion

PRICED = ModelSpec(input_price_per_mtok=2.0, output_price_per_mtok=8.0)


class SlowBackend:
    """Answers after a pause, so many calls are in flight at once; 1000 prompt + 500 completion tokens."""

    identity = "slow"

    def __init__(self, max_concurrency: int = 8) -> None:
        self.max_concurrency = max_concurrency
        self.paid = 0

    async def complete(self, request: BackendRequest) -> Completion:
        self.paid += 1
        await asyncio.sleep(0.02)
        return Completion(text="ok", prompt_tokens=1000, completion_tokens=500)

    async def aclose(self) -> None:
        return None


def lm_with(backend, cache, spec: ModelSpec = PRICED, **budget) -> LM:
    return LM(LMConfig(models={"default": spec}), backends={"default": backend}, cache=cache, budget=Budget(**budget))


async def run_many(lm: LM, n: int) -> list[object]:
    return await asyncio.gather(*(lm.complete([Message("user", f"q{i}")], role="solve") for i in range(n)),
                                return_exceptions=True)


async def test_a_call_budget_is_never_overshot_by_calls_in_flight(cache):
    backend = SlowBackend(max_concurrency=8)
    lm = lm_with(backend, cache, max_calls=10)
    results = await run_many(lm, 30)
    assert backend.paid == 10  # before: up to 10 + 7 (the calls admitted while the first 8 were paying)
    assert sum(isinstance(r, BudgetExceeded) for r in results) == 20
    assert lm.ledger.total().calls == 10


async def test_token_and_cost_budgets_count_the_expected_spend_of_calls_in_flight(cache):
    backend = SlowBackend(max_concurrency=8)
    lm = lm_with(backend, cache, max_tokens=15_000)  # room for 10 calls of 1500 tokens
    await run_many(lm, 30)
    # The first 8 start before any is answered (nothing known yet); after that each call in flight counts
    # as an average one, so the overshoot is at most one concurrency window, not one per later call.
    assert 10 <= backend.paid <= 17 and lm.ledger.total().tokens <= 17 * 1500
    assert lm.ledger.total().tokens - 15_000 < 8 * 1500


async def test_cost_is_in_the_ledger_paid_and_effective_and_a_cost_budget_stops_the_run(cache, tmp_path):
    backend = SlowBackend(max_concurrency=1)
    each = (1000 * 2.0 + 500 * 8.0) / 1e6  # $0.006
    lm = lm_with(backend, cache, max_cost=5 * each - 1e-9)
    results = await run_many(lm, 8)
    assert backend.paid == 5 and sum(isinstance(r, BudgetExceeded) for r in results) == 3
    total = lm.ledger.total()
    assert total.cost_usd == pytest.approx(5 * each) and total.unpriced_calls == 0
    # A second run inherits those answers: free to it, but counted in its effective cost.
    second = lm_with(SlowBackend(), cache)
    await run_many(second, 2)
    t2 = second.ledger.total()
    assert (t2.cost_usd, t2.inherited_cost_usd) == (0.0, pytest.approx(2 * each))
    assert t2.effective_cost_usd == pytest.approx(2 * each)
    # The cost survives the ledger's round trip and is shown in its table.
    again = UsageLedger.from_dict(lm.ledger.to_dict())
    assert again.total().cost_usd == pytest.approx(5 * each)
    assert lm.ledger.to_dict()["total"]["effective_cost_usd"] == pytest.approx(5 * each)
    from rich.console import Console

    console = Console(width=250, record=True)
    console.print(lm.ledger.table())
    assert "$0.0300" in console.export_text()


def test_a_cost_budget_refuses_a_model_without_a_price(cache):
    server = ModelSpec(backend="openai", model="my-own-model", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ConfigError, match="default has none: set input_price_per_mtok"):
        LM(LMConfig(models={"default": server}), cache=cache, budget=Budget(max_cost=1.0))


def test_prices_come_from_the_config_the_cost_map_or_are_free_locally():
    assert price_for(PRICED) == Price(2.0, 8.0)
    assert price_for(ModelSpec()) == FREE  # the embedded model runs here
    cost_map = {"gpt-4o-mini": {"input_cost_per_token": 1.5e-7, "output_cost_per_token": 6e-7}}
    server = ModelSpec(backend="openai", model="openai/gpt-4o-mini", base_url="http://127.0.0.1:1/v1")
    price = price_for(server, cost_map)
    assert price is not None and price.source == "litellm"
    assert (price.input_per_mtok, price.output_per_mtok) == (pytest.approx(0.15), pytest.approx(0.6))
    assert price_from_cost_map("unknown", cost_map) is None
    assert price_for(server, {}) is None
    assert isinstance(litellm_cost_map(), dict)  # {} when LiteLLM is not installed


def test_budget_config_takes_a_cost():
    assert BudgetConfig(max_cost=2.5).max_cost == 2.5
    with pytest.raises(ValueError):
        BudgetConfig(max_cost=0)


def test_an_unpriced_model_shows_no_cost_rather_than_zero():
    from decoevo.lm.ledger import dollars

    ledger = UsageLedger()
    ledger.record_call("solve", "m", 10, 5, 0.1, cost_usd=None)
    ledger.record_hit("solve", "m", 15, None)
    total = ledger.total()
    assert total.unpriced_calls == 2 and total.effective_cost_usd == 0.0
    assert dollars(total.cost_usd, total.unpriced_calls) == "-"
    ledger.record_call("judge", "p", 10, 5, 0.1, cost_usd=0.5)
    total = ledger.total()
    assert dollars(total.cost_usd, total.unpriced_calls) == ">=$0.5000"


def test_a_plain_install_prices_a_known_provider_offline_and_not_a_self_hosted_namesake(monkeypatch):
    """Issue 25 item 3: without LiteLLM, GPT-4o at OpenAI printed "dollars unknown". The genai-prices table
    ships with the package and is read with the network off; a server it does not know (127.0.0.1 serving a
    model called gpt-4o) stays unpriced; the ModelSpec's own price overrides the table per model."""
    import socket

    from decoevo.lm.pricing import price_from_table

    def no_network(*args, **kwargs):
        raise OSError("no network in this test")

    monkeypatch.setattr(socket.socket, "connect", no_network)
    price_from_table.cache_clear()
    openai = ModelSpec(backend="openai", model="gpt-4o", base_url="https://api.openai.com/v1")
    price = price_for(openai, {})
    assert price is not None and price.source.startswith("genai-prices ")
    assert (price.input_per_mtok, price.output_per_mtok) == (pytest.approx(2.5), pytest.approx(10.0))
    claude = price_for(ModelSpec(backend="litellm", model="anthropic/claude-sonnet-4-20250514"), {})
    assert claude is not None and (claude.input_per_mtok, claude.output_per_mtok) == (pytest.approx(3.0),
                                                                                        pytest.approx(15.0))
    assert price_for(ModelSpec(backend="openai", model="gpt-4o", base_url="http://127.0.0.1:8000/v1"), {}) is None
    mine = ModelSpec(backend="openai", model="gpt-4o", base_url="https://api.openai.com/v1", input_price_per_mtok=1.0,
                     output_price_per_mtok=4.0)
    assert price_for(mine) == Price(1.0, 4.0)


async def test_an_experiments_cap_is_shared_by_every_lm_and_cached_answers_pass_it(cache, tmp_path, monkeypatch):
    """Issue 25 item 3: with DECOEVO_SPEND_FILE and DECOEVO_MAX_COST set (as `reproduce --max-cost` sets them
    for its cells and grading), LMs of separate runs add their paid dollars to one file and each stops at the
    shared sum, as a budget stop; answers from the cache cost nothing and are never refused."""
    from decoevo.lm.spend import CAP_ENV, FILE_ENV, SpendCapReached, read_spend

    each = (1000 * 2.0 + 500 * 8.0) / 1e6  # $0.006
    spend = tmp_path / "spend.log"
    monkeypatch.setenv(FILE_ENV, str(spend))
    monkeypatch.setenv(CAP_ENV, repr(5 * each - 1e-9))
    first, second = SlowBackend(max_concurrency=1), SlowBackend(max_concurrency=1)
    lm_a, lm_b = lm_with(first, cache), lm_with(second, cache)  # no budget of their own
    assert not any(isinstance(r, Exception) for r in await run_many(lm_a, 3))
    results = await run_many(lm_b, 6)  # q0-q2 are lm_a's answers in the cache: free, not refused
    assert first.paid == 3 and second.paid == 2
    assert not any(isinstance(r, Exception) for r in results[:5])
    assert isinstance(results[5], SpendCapReached) and isinstance(results[5], BudgetExceeded)
    assert read_spend(spend) == pytest.approx(5 * each)
    kinds = [line.split()[0] for line in spend.read_text().splitlines()]  # the hits reserved nothing
    assert kinds.count("r") == kinds.count("s") == 5 and kinds[-1] == "x"  # x: the stop at the cap
    monkeypatch.setenv(CAP_ENV, "-1")
    with pytest.raises(ConfigError, match="positive number of dollars"):
        lm_with(first, cache)
