"""Topping a run up past T steps (issue 25 item 4): steps past T that would replay cached requests spend
nothing, so a Budget-Matched or topped-up run must still reach its paired run's tokens, and a top-up that
can never spend its budget must still end."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from decoevo.analysis.costs import load_run_usage
from decoevo.domain import Question
from decoevo.engine.config import config_from_dict, deep_merge
from decoevo.engine.run import Engine
from decoevo.engine.top_up import HARD_BOUND_FACTOR, more_steps, rewrite_sample_index
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.lm.types import BackendRequest
from decoevo.presets import PRESETS
from decoevo.rundir import RunReader
from decoevo.testing import world
from decoevo.testing.scripted import ScriptedBackend

from .engine_helpers import toy_questions


def _sim_run(root: Path, name: str, method: str, seed: int, cache: RequestCache, budget: dict) -> Path:
    from decoevo.testing.sim_backend import SimBackend, run_virtual
    from decoevo.testing.sim_model import LatencyModel
    from decoevo.testing.toy_server import write_toy_questions

    data = write_toy_questions(root / "q.jsonl", 40)
    # quick sizes with a train split no larger than a batch: every step draws the same questions, so past T,
    # while the solver is unchanged, the old loop re-asked the very requests it had answered
    raw = deep_merge(PRESETS["quick"], {"method": method, "seed": seed, "budget": budget,
                                        "data": {"path": str(data), "format": "jsonl"},
                                        "splits": {"train": 2, "test": 0}, "hyper": {"steps": 6}})
    lm = LM(LMConfig(), backends={"default": SimBackend(0, LatencyModel.fixed(1.0), 64)}, cache=cache)
    run_virtual(Engine(config_from_dict(raw), root / name, lm=lm).run_async())
    return root / name


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_topped_up_run_whose_steps_repeat_reaches_its_paired_tokens(tmp_path: Path, seed: int) -> None:
    """Fails on the old code: Budget-Matched ended at its step cap with 0.19-0.35× DecoEvo's tokens (every
    step past T a cache hit); now each step past T asks for a fresh rewrite and it stops on the budget."""
    cache = RequestCache(tmp_path / "cache.sqlite")
    paired = _sim_run(tmp_path, "decoevo", "decoevo", seed, cache, {})
    base = load_run_usage(paired).total.effective_tokens
    match = {"match_run": str(paired), "match_on": "tokens"}
    for name, method, extra in (("bm", "budget_matched", {}), ("topped", "skillopt", {"top_up": True})):
        run = _sim_run(tmp_path, name, method, seed, cache, {**match, **extra})
        ratio = load_run_usage(run).total.effective_tokens / base
        assert abs(ratio - 1) <= 0.05, (name, ratio)
        events = [json.loads(x) for x in (run / "events.jsonl").read_text().splitlines()]
        assert any(e["event"] == "budget_stop" and "token budget" in e["reason"] for e in events), name
        steps = [e["step"] for e in events if e["event"] == "inner_step"]
        assert max(steps) >= 6  # it got there by steps past T


def _saturated(request: BackendRequest) -> str:
    """The toy world, but every criterion is fully met: no step has a failure to rewrite from."""
    title = (request.json_schema or {}).get("title", "")
    reply = world.respond([m.as_dict() for m in request.messages], request.json_schema, request.params.sample_index)
    if title.startswith("JointVerdicts"):
        out = json.loads(reply)
        return json.dumps({"verdicts": [{**v, "level": 4} for v in out["verdicts"]]})
    return reply


def test_a_top_up_that_can_never_reach_its_budget_ends_at_the_hard_bound(tmp_path: Path) -> None:
    """No failures means no rewrite, and with a train split of one batch every step past the first is
    answered by the run's own cache: nothing is ever spent again. Such steps do not count toward
    budget_step_cap × T, so the run ends on the hard bound (HARD_BOUND_FACTOR × that), not never."""
    cap, steps = 3, 2
    config = config_from_dict({
        "method": "skillopt", "seed": 7, "data": {"path": "unused.jsonl"},
        "budget": {"max_tokens": 10**9, "top_up": True},
        "splits": {"train": 2, "probe": 0, "solver_gate": 2, "generator_gate": 0},
        "hyper": {"steps": steps, "batch_size": 2, "concurrency": 4, "budget_step_cap": cap},
    })
    backend = ScriptedBackend(_saturated)
    lm = LM(LMConfig(), backends={"default": backend}, cache=RequestCache(tmp_path / "cache.sqlite"))
    questions = [Question(**q.model_dump()) for q in toy_questions()]
    result = asyncio.run(Engine(config, tmp_path / "run", lm=lm, questions=questions).run_async())
    assert result.state.stopped is None  # it ended on its steps, far short of its budget
    assert result.state.next_step == HARD_BOUND_FACTOR * cap * steps
    assert result.state.idle_steps == result.state.next_step - 1  # only the first step paid anything
    paid_after_first = [c for c in RunReader(tmp_path / "run").calls() if not c.cached and c.phase != "step 0"]
    assert paid_after_first == []


def test_steps_past_t_draw_fresh_rewrite_samples_and_idle_steps_do_not_count() -> None:
    assert [rewrite_sample_index(s, 3) for s in range(6)] == [0, 0, 0, 1, 2, 3]
    assert more_steps(5, 0, 6, topped_up=False) and not more_steps(6, 4, 6, topped_up=False)
    assert more_steps(6, 1, 6, topped_up=True)  # one of six steps spent nothing: one more
    assert not more_steps(6, 0, 6, topped_up=True)
    assert not more_steps(HARD_BOUND_FACTOR * 6, 10, 6, topped_up=True)  # idle or not, it ends


def test_sweep_parity_flag_runs_the_controls_at_decoevos_tokens(tmp_path: Path, monkeypatch) -> None:
    """`decoevo sweep --parity` (fails on the old code: no such option) applies the rule `reproduce` does:
    SC-CoEvo topped up to, and Budget-Matched capped at, the paired DecoEvo run's tokens; written to
    SWEEP/sweep.yaml, so a continued sweep keeps it."""
    pytest.importorskip("uvicorn")
    import yaml

    from .sweep_helpers import served_toy, sweep, write_spec

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))  # cell processes inherit it
    with served_toy() as server:
        # the toy world's steps past T cost one short rewrite each (~30 tokens): room for enough of them
        spec = write_spec(tmp_path / "grid.yaml", server.url, ["decoevo", "sc_coevo", "budget_matched"], [0],
                          hyper={"steps": 2, "batch_size": 2, "audit_every": 1, "rollouts": 4,
                                 "budget_step_cap": 50})
        code, out = sweep(tmp_path / "SW", "--spec", spec, "--parity", "--workers", 1)
    assert code == 0, out
    stored = yaml.safe_load((tmp_path / "SW" / "sweep.yaml").read_text())
    assert stored["top_up"] == ["sc_coevo"] and stored["budget"]["match_on"] == "tokens"
    runs = tmp_path / "SW" / "runs" / "toy"
    base = load_run_usage(runs / "decoevo-s0").total.effective_tokens
    for control in ("sc_coevo-s0", "budget_matched-s0"):
        budget = yaml.safe_load((runs / control / "config.yaml").read_text())["budget"]
        assert budget["match_on"] == "tokens" and budget["match_run"].endswith("decoevo-s0")
        ratio = load_run_usage(runs / control).total.effective_tokens / base
        assert abs(ratio - 1) <= 0.05, (control, ratio)
    code, out = sweep(tmp_path / "SW2", "--methods", "skillopt,sc_coevo", "--parity")
    assert code == 2 and "add decoevo to methods" in " ".join(out.split()), out
