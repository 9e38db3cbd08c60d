"""The model interface's logic, on a scripted backend."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel, Field

from decoevo.lm import (
    LM,
    Budget,
    BudgetExceeded,
    Completion,
    GenParams,
    InfrastructureError,
    LMConfig,
    Message,
    ParseError,
    RefusalError,
    RetryableError,
)
from decoevo.lm.types import BackendRequest
from decoevo.testing.scripted import ScriptedBackend

MSGS = [Message("user", "rate this")]


class Verdict(BaseModel):
    score: float = Field(ge=0, le=1)
    rationale: str


async def test_plain_text_call_and_ledger(make_lm):
    lm, backend = make_lm(lambda r: "hello")
    result = await lm.complete(MSGS, role="solve")
    assert result.text == "hello" and not result.cached
    row = lm.ledger.rows[("solve", "default")]
    assert row.calls == 1 and row.cache_hits == 0 and row.completion_tokens >= 1
    assert len(backend.calls) == 1


async def test_second_identical_call_is_a_free_cache_hit(make_lm):
    lm, backend = make_lm(lambda r: '{"score": 0.5, "rationale": "ok"}')
    first = await lm.complete(MSGS, role="judge", schema=Verdict)
    second = await lm.complete(MSGS, role="judge", schema=Verdict)
    assert first.value == second.value == Verdict(score=0.5, rationale="ok")
    assert second.cached and second.prompt_tokens == 0 and second.completion_tokens == 0
    assert len(backend.calls) == 1
    row = lm.ledger.rows[("judge", "default")]
    assert (row.calls, row.cache_hits) == (1, 1)


async def test_sample_index_makes_distinct_requests(make_lm):
    lm, backend = make_lm(lambda r: f"sample {r.params.sample_index}")
    texts = [
        (await lm.complete(MSGS, role="solve", params=GenParams(temperature=0.8, sample_index=i))).text
        for i in range(3)
    ]
    assert texts == ["sample 0", "sample 1", "sample 2"]
    assert len({c.params.effective_seed() for c in backend.calls}) == 3


async def test_repair_fixes_a_malformed_output(make_lm):
    outputs = iter(['{"score": 1.7, "rationale": "too high"}', '{"score": 0.7, "rationale": "fixed"}'])
    lm, backend = make_lm(lambda r: next(outputs))
    result = await lm.complete(MSGS, role="judge", schema=Verdict)
    assert result.value == Verdict(score=0.7, rationale="fixed")
    assert result.attempts == 2
    # the repair request shows the model its bad answer and what was wrong with it
    repair = backend.calls[1].messages
    assert repair[-2].role == "assistant" and "1.7" in repair[-2].content
    assert "score" in repair[-1].content
    assert lm.ledger.rows[("judge", "default")].repairs == 1


async def test_repairs_are_new_requests_the_first_as_asked_later_ones_sampled(make_lm):
    """A deterministic model asked the same thing answers the same: the first repair keeps the temperature
    asked for, later ones sample (0.3 at least), and every attempt has a sample index of its own."""
    lm, backend = make_lm(lambda r: '{"score": 9, "rationale": "bad"}', max_repairs=2)
    with pytest.raises(ParseError):
        await lm.complete(MSGS, role="judge", schema=Verdict)
    temps = [c.params.temperature for c in backend.calls]
    assert len(backend.calls) == 3 and temps[:2] == [0.0, 0.0] and temps[2] >= 0.3, temps
    assert len({c.params.sample_index for c in backend.calls}) == 3


async def test_closing_the_lm_closes_its_backends(cache):
    closed: list[str] = []

    class Closing(ScriptedBackend):
        async def aclose(self) -> None:
            closed.append(self.identity)

    lm = LM(LMConfig(), backends={"default": Closing(lambda r: "x")}, cache=cache)
    await lm.complete(MSGS, role="solve")
    await lm.aclose()
    assert closed == ["scripted"]


async def test_malformed_output_never_becomes_a_value(make_lm):
    lm, backend = make_lm(lambda r: '{"score": "high", "rationale": 3')
    with pytest.raises(ParseError) as info:
        await lm.complete(MSGS, role="judge", schema=Verdict)
    assert info.value.category == "parse" and info.value.raw.startswith('{"score"')
    assert len(backend.calls) == 3  # first try + max_repairs (2), then it stops
    assert lm.ledger.rows[("judge", "default")].failures["parse"] == 1


async def test_refusal_is_its_own_category(make_lm):
    lm, _ = make_lm(lambda r: "I'm sorry, but I can't help with grading this.")
    with pytest.raises(RefusalError):
        await lm.complete(MSGS, role="judge", schema=Verdict)
    assert lm.ledger.rows[("judge", "default")].failures["refusal"] == 1


async def test_transient_faults_are_retried_then_succeed(make_lm):
    outcomes = iter([RetryableError("429", retry_after=2.0), RetryableError("500"), "fine"])
    lm, _backend = make_lm(lambda r: next(outcomes))
    slept: list[float] = []

    async def record_sleep(seconds: float) -> None:
        slept.append(seconds)

    lm._sleep = record_sleep
    result = await lm.complete(MSGS, role="solve")
    assert result.text == "fine"
    assert slept[0] == 2.0  # Retry-After honoured
    assert len(slept) == 2 and lm.ledger.rows[("solve", "default")].retries == 2


async def test_retries_are_bounded_and_end_in_an_infrastructure_error(make_lm):
    lm, backend = make_lm(lambda r: RetryableError("503"))
    lm.config.models["default"] = lm.config.models["default"].model_copy(update={"max_retries": 3})
    with pytest.raises(InfrastructureError) as info:
        await lm.complete(MSGS, role="judge", schema=Verdict)
    assert len(backend.calls) == 4
    assert info.value.category == "infrastructure"
    row = lm.ledger.rows[("judge", "default")]
    assert row.failures["infrastructure"] == 1 and row.calls == 0


async def test_failed_calls_are_not_cached(make_lm):
    state = {"fail": True}

    def script(r):
        return RetryableError("down") if state["fail"] else "up"

    lm, _backend = make_lm(script)
    lm.config.models["default"] = lm.config.models["default"].model_copy(update={"max_retries": 0})
    with pytest.raises(InfrastructureError):
        await lm.complete(MSGS, role="solve")
    state["fail"] = False
    assert (await lm.complete(MSGS, role="solve")).text == "up"


async def test_identical_concurrent_requests_are_paid_once(make_lm):
    lm, backend = make_lm(lambda r: "shared")
    results = await asyncio.gather(*[lm.complete(MSGS, role="solve") for _ in range(5)])
    assert {r.text for r in results} == {"shared"}
    assert len(backend.calls) == 1
    assert [r.prompt_tokens > 0 for r in results].count(True) == 1  # the others are hits: no tokens of their own


async def test_a_request_waiting_on_an_identical_one_in_flight_is_a_hit(cache):
    """Not a cache hit: the answer is still on its way when the copies ask. They wait for it and are hits,
    their tokens paid by the one request sent."""
    release = asyncio.Event()

    class Slow(ScriptedBackend):
        async def complete(self, request: BackendRequest) -> Completion:
            await release.wait()
            return await super().complete(request)

    backend = Slow(lambda r: "shared")
    lm = LM(LMConfig(), backends={"default": backend}, cache=cache)
    tasks = [asyncio.create_task(lm.complete(MSGS, role="solve")) for _ in range(3)]
    while not lm._inflight:  # the first is being paid for
        await asyncio.sleep(0)
    for _ in range(20):  # the copies reach it (each waits on the first's answer, not on the server)
        await asyncio.sleep(0)
    release.set()
    results = await asyncio.gather(*tasks)
    assert len(backend.calls) == 1
    assert sorted(r.cached for r in results) == [False, True, True]
    assert [r.prompt_tokens > 0 for r in results].count(True) == 1


async def test_budget_stops_paid_calls_but_not_cache_hits(make_lm):
    lm, _backend = make_lm(lambda r: r.messages[-1].content.upper())
    lm.budget = Budget(max_calls=2)
    await lm.complete([Message("user", "a")], role="solve")
    await lm.complete([Message("user", "b")], role="solve")
    with pytest.raises(BudgetExceeded):
        await lm.complete([Message("user", "c")], role="solve")
    assert (await lm.complete([Message("user", "a")], role="solve")).text == "A"


async def test_role_map_routes_to_another_model(cache):
    from decoevo.lm import LM, LMConfig, ModelSpec
    from decoevo.testing.scripted import ScriptedBackend

    solver = ScriptedBackend(lambda r: "from solver model", identity="a")
    judge = ScriptedBackend(lambda r: "from judge model", identity="b")
    config = LMConfig(models={"default": ModelSpec(), "big": ModelSpec()}, roles={"judge": "big"})
    lm = LM(config, backends={"default": solver, "big": judge}, cache=cache)
    assert (await lm.complete(MSGS, role="solve")).text == "from solver model"
    assert (await lm.complete(MSGS, role="judge")).text == "from judge model"
    assert set(lm.ledger.rows) == {("solve", "default"), ("judge", "big")}


async def test_cache_bypass_switch(cache):
    from decoevo.lm import LM, LMConfig
    from decoevo.testing.scripted import ScriptedBackend

    backend = ScriptedBackend(lambda r: "x")
    lm = LM(LMConfig(use_cache=False), backends={"default": backend}, cache=cache)
    await lm.complete(MSGS, role="solve")
    await lm.complete(MSGS, role="solve")
    assert len(backend.calls) == 2 and len(cache) == 0


async def test_length_cutoff_is_explained_in_the_repair(make_lm):
    outputs = iter([Completion('{"score": 0.5, "rationale": "aaaa', 5, 64, finish_reason="length"),
                    '{"score": 0.5, "rationale": "short"}'])
    lm, backend = make_lm(lambda r: next(outputs))
    result = await lm.complete(MSGS, role="judge", schema=Verdict)
    assert result.value.rationale == "short"
    assert "token limit" in backend.calls[1].messages[-1].content


async def test_on_call_observer_sees_paid_calls_and_hits(make_lm):
    lm, _ = make_lm(lambda r: "x")
    seen = []
    lm.on_call = seen.append
    await lm.complete(MSGS, role="solve")
    await lm.complete(MSGS, role="solve")
    assert [r.cached for r in seen] == [False, True]
    assert seen[0].key == seen[1].key and seen[0].completion_tokens >= 1


async def test_hits_on_answers_paid_by_another_run_are_inherited_not_free(make_lm, cache):
    from decoevo.lm import LM, LMConfig
    from decoevo.testing.scripted import ScriptedBackend

    first, _ = make_lm(lambda r: "paid once")
    await first.complete(MSGS, role="solve")
    await first.complete(MSGS, role="solve")  # an in-run hit: free for this run too
    row = first.ledger.rows[("solve", "default")]
    assert (row.calls, row.cache_hits, row.inherited_calls) == (1, 1, 0)

    backend = ScriptedBackend(lambda r: "never called")
    second = LM(LMConfig(), backends={"default": backend}, cache=cache, budget=Budget(max_calls=1))
    await second.complete(MSGS, role="solve")  # answered by the first run's cache entry
    await second.complete(MSGS, role="solve")
    row = second.ledger.rows[("solve", "default")]
    assert (row.calls, row.cache_hits, row.inherited_calls) == (0, 2, 1) and row.inherited_tokens > 0
    assert row.effective_calls == 1 and not backend.calls
    with pytest.raises(BudgetExceeded):  # what this run would cost alone counts against its budget
        await second.complete([Message("user", "new")], role="solve")


async def test_a_fully_cached_rerun_stops_at_its_budget(make_lm, cache):
    """Budgets count paid + inherited spend (docs/configuration.md): a run whose every answer is in another
    run's cache pays nothing, yet stops where it would have stopped alone."""
    from decoevo.lm import LM, LMConfig
    from decoevo.testing.scripted import ScriptedBackend

    first, _ = make_lm(lambda r: "paid by the first run")
    for i in range(3):
        await first.complete([Message("user", f"q{i}")], role="solve")
    backend = ScriptedBackend(lambda r: "never called")
    rerun = LM(LMConfig(), backends={"default": backend}, cache=cache, budget=Budget(max_calls=2))
    for i in range(2):
        await rerun.complete([Message("user", f"q{i}")], role="solve")
    with pytest.raises(BudgetExceeded, match="call budget reached: 2 of 2"):
        await rerun.complete([Message("user", "q2")], role="solve")
    await rerun.complete([Message("user", "q0")], role="solve")  # its own answers stay free, past the cap
    assert not backend.calls and rerun.ledger.total().effective_calls == 2


async def test_unusable_answers_are_evicted_so_a_later_call_can_succeed(make_lm, cache):
    state = {"broken": True}
    lm, _backend = make_lm(lambda r: '{"score": "garbled"' if state["broken"] else '{"score": 0.5, "rationale": "ok"}')
    with pytest.raises(ParseError):
        await lm.complete(MSGS, role="judge", schema=Verdict)
    assert len(cache) == 0  # nothing unusable is kept for replay
    state["broken"] = False  # the transient cause is gone
    result = await lm.complete(MSGS, role="judge", schema=Verdict)
    assert result.value.score == 0.5 and not result.cached


async def test_repairs_answered_from_cache_are_not_counted_again(make_lm):
    outputs = iter(['{"score": 7, "rationale": "x"}', '{"score": 0.7, "rationale": "x"}'])
    lm, _ = make_lm(lambda r: next(outputs))
    await lm.complete(MSGS, role="judge", schema=Verdict)
    await lm.complete(MSGS, role="judge", schema=Verdict)  # replays both answers from the cache
    assert lm.ledger.rows[("judge", "default")].repairs == 1
