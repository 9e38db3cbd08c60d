"""Independent awaits run together: the same events, skills and paid calls as one after another, in fewer
dependency waves."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from decoevo.aio import done, gather_all, one_by_one, together
from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, ModelSpec, RequestCache
from decoevo.lm.openai_backend import OpenAIBackend
from decoevo.presets import PRESETS
from decoevo.testing.sim_backend import SimBackend, run_virtual
from decoevo.testing.sim_model import LatencyModel
from decoevo.testing.toy_server import write_toy_questions

from .engine_helpers import toy_engine


def outcome(run_dir: Path) -> dict:
    """What a run decided: its events without timestamps (and the start's run id, drawn per run), every skill
    file, and its paid usage."""
    events = [{k: v for k, v in json.loads(line).items() if k not in ("t", "run_id")}
              for line in (run_dir / "events.jsonl").read_text().splitlines()]
    skills = {str(p.relative_to(run_dir)): p.read_text() for p in sorted((run_dir / "skills").rglob("*"))
              if p.is_file()}
    total = json.loads((run_dir / "ledger.json").read_text())["total"]
    return {"events": events, "skills": skills, "calls": total["calls"], "tokens": total["tokens"]}


def recording_step(order: list[str]) -> Callable[..., Awaitable[str]]:
    """A step that sleeps, notes its name in `order` when it ends, then fails or returns its name."""
    async def step(name: str, delay: float, fail: bool = False) -> str:
        await asyncio.sleep(delay)
        order.append(name)
        if fail:
            raise ValueError(name)
        return name

    return step


async def test_together_returns_in_order_and_raises_the_first_failure_in_order():
    order: list[str] = []

    step = recording_step(order)
    assert await together(step("a", 0.02), step("b", 0.0), done("c")) == ("a", "b", "c")
    assert order == ["b", "a"]  # concurrent: the shorter finished first
    order.clear()
    with pytest.raises(ValueError, match=r"^a$"):  # b failed first in time, a first in argument order
        await together(step("a", 0.03, fail=True), step("b", 0.0, fail=True), step("c", 0.05))
    assert order == ["b", "a", "c"]  # no sibling was left running
    order.clear()
    with one_by_one():
        assert await together(step("a", 0.02), step("b", 0.0)) == ("a", "b")
    assert order == ["a", "b"]


async def test_gather_all_waits_for_every_sibling_and_returns_exceptions_as_values():
    """The engine's fan-outs (`EngineContext.gather`, a judge's criteria, a grader's items): a failure is
    raised only when every sibling has finished, and an exception *returned* (a grader's typed failure
    of one item) is a result, not a failure."""
    order: list[str] = []

    step = recording_step(order)
    async def typed_failure() -> ValueError:
        return ValueError("an item the grader could not parse")

    with pytest.raises(ValueError, match=r"^b$"):
        await gather_all(step("a", 0.03), step("b", 0.0, fail=True), step("c", 0.05))
    assert order == ["b", "a", "c"]
    a, b = await gather_all(step("x", 0.0), typed_failure())
    assert a == "x" and isinstance(b, ValueError)
    assert await gather_all() == ()


@pytest.mark.parametrize("method", ["decoevo", "sc_coevo", "no_rubric_blind", "no_distillation", "direct_audit"])
async def test_toy_world_concurrent_equals_sequential(tmp_path, method):
    engine, _ = toy_engine(tmp_path / "seq", method)
    with one_by_one():
        await engine.run_async()
    engine_c, _ = toy_engine(tmp_path / "con", method)
    await engine_c.run_async()
    assert outcome(tmp_path / "con" / method) == outcome(tmp_path / "seq" / method)


def _sim_engine(tmp: Path, data: Path, method: str, latency: LatencyModel,
                shortcuts: bool | None = None) -> tuple[Engine, list[tuple[str, float]]]:
    config = config_from_dict({
        "method": method, "seed": 2, "data": {"path": str(data), "format": "jsonl"},
        "splits": {"train": 8, "probe": 3, "solver_gate": 4, "generator_gate": 4},
        "hyper": {"steps": 4, "batch_size": 3, "audit_every": 2, "rollouts": 4, "tau_tie": 0.3,
                  "concurrency": 64,
                  # the short cut asks a blind comparison's two orders one after the other; without the
                  # structural objective to settle rounds, that leaves this small run too few parallel calls
                  # to tell concurrent from sequential
                  "decision_shortcuts": method != "no_structural" if shortcuts is None else shortcuts}})
    lm = LM(LMConfig(), backends={"default": SimBackend(seed=5, latency=latency, max_concurrency=64)},
            cache=RequestCache(tmp / "cache.sqlite"))
    marks: list[tuple[str, float]] = []
    engine = Engine(config, tmp / "run", lm=lm,
                    observer=lambda event, state: marks.append((event.event, asyncio.get_running_loop().time())))
    return engine, marks


@pytest.mark.parametrize("method", ["decoevo", "sc_coevo", "no_structural"])
def test_simulated_model_concurrent_equals_sequential(tmp_path, method):
    """On the simulated model every step's replies differ (no cache replay), and latencies vary."""
    data = write_toy_questions(tmp_path / "q.jsonl", 30)
    seq, _ = _sim_engine(tmp_path / "seq", data, method, LatencyModel())
    with one_by_one():
        _, seq_seconds = run_virtual(seq.run_async())
    con, _ = _sim_engine(tmp_path / "con", data, method, LatencyModel())
    _, con_seconds = run_virtual(con.run_async())
    got, want = outcome(tmp_path / "con" / "run"), outcome(tmp_path / "seq" / "run")
    assert got == want
    assert con_seconds < 0.9 * seq_seconds  # the twin really awaited one by one (inside tasks too)
    assert sum(e["event"] == "outer_round" for e in got["events"]) >= 2


@pytest.mark.parametrize(("shortcuts", "most"), [(False, 7), (True, 13)])
def test_an_outer_round_takes_at_most_so_many_waves(tmp_path, shortcuts, most):
    """Every call takes one virtual second: a round's virtual duration is its dependency waves. Without the
    decision short cuts: probe audits (rubric -> rollouts' judges -> both blind orders -> reveal) with V_g's
    pairs alongside, the rewrite, then both generators' objectives: 4 + 1 + 2. One after another
    (`one_by_one`) the two rounds took 21 and 18. With them (the default), the blind orders go one after
    the other and Γ waits for the structural verification: 5 + 1 + 2 (rubric, audit) + 5 (Γ: answer, judge,
    two blind orders; margins) at most, the price in latency of the calls they save (docs/cost.md)."""
    data = write_toy_questions(tmp_path / "q.jsonl", 30)
    engine, marks = _sim_engine(tmp_path, data, "decoevo", LatencyModel.fixed(1.0), shortcuts)
    run_virtual(engine.run_async())
    rounds = [t - marks[i - 1][1] for i, (kind, t) in enumerate(marks) if kind == "outer_round"]
    steps = [t - marks[i - 1][1] for i, (kind, t) in enumerate(marks) if kind == "inner_step" and i > 0]
    assert rounds and max(rounds) <= most and max(rounds) >= 5
    assert steps and max(steps) <= 5  # batch (answer + rubric, judge), rewrite, both skills on V_s


def test_server_backends_default_to_64_in_flight_and_the_paper_preset_to_64_questions():
    spec = ModelSpec(backend="openai", base_url="http://127.0.0.1:9/v1")
    assert OpenAIBackend(spec).max_concurrency == 64
    assert OpenAIBackend(spec.model_copy(update={"max_concurrency": 5})).max_concurrency == 5
    assert PRESETS["paper"]["hyper"]["concurrency"] == 64
