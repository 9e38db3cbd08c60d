"""The expected paid calls a run's progress line showed, step by step, rebuilt from its run directory: its
events and call log replayed through the progress bar (`RunProgress`), so a finished run shows how close
each re-estimate came to what it paid (bench/cost/estimate_accuracy.py, tests/test_estimate_live.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console

from ..domain import Skill
from ..engine.config import config_from_dict
from ..engine.state import LoopState
from ..lm import CallRecord
from ..rundir import InnerStepEvent, InnerStepFailedEvent, OuterRoundEvent, OuterRoundFailedEvent
from ..rundir.outcomes import Outcome
from .run_progress import Plan, RunProgress

_EVENTS: dict[str, Any] = {"inner_step": InnerStepEvent, "inner_step_failed": InnerStepFailedEvent,
           "outer_round": OuterRoundEvent, "outer_round_failed": OuterRoundFailedEvent}


def expected_by_event(run_dir: Path) -> list[dict[str, Any]]:
    """One row per inner step and outer round: where (`step 0`, `outer 0`), the paid calls so far and the
    expected paid calls of the whole run the progress line showed after it; the first row is the estimate
    printed before the run."""
    import yaml

    config = config_from_dict(yaml.safe_load((run_dir / "config.yaml").read_text(encoding="utf-8")))
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    calls = [json.loads(line) for line in (run_dir / "calls.jsonl").read_text(encoding="utf-8").splitlines()]
    start = next((e for e in events if e["event"] == "start"), None)
    steps = int(start["config"]["hyper"]["steps"]) if start else config.hyper.steps
    phase = {"now": "start"}
    bar = RunProgress(Console(file=io.StringIO(), width=120), steps, "replay", Plan.of(config, steps),
                      phase=lambda: phase["now"])
    rows = [{"after": "start", "paid": 0, "expected": round(bar.plan.expected_calls)}]
    state = LoopState(solver=Skill(kind="solver", version=0, text="-"),
                      generator=Skill(kind="generator", version=0, text="-"))
    for raw in events:
        kind = _EVENTS.get(raw["event"])
        if kind is None:
            continue
        event = kind.model_validate(raw)
        inner = isinstance(event, InnerStepEvent | InnerStepFailedEvent)
        where = f"step {raw['step']}" if inner else f"outer {raw['round']}"
        phase["now"] = where
        for record in calls:
            if record.get("phase") == where:
                bar.on_call(CallRecord(role=record["role"], model=record["model"], key=record["key"],
                                       cached=record["cached"], prompt_tokens=0, completion_tokens=0))
        # the loop state the engine held when it emitted the event (engine/run.py)
        if inner:
            state.next_step = int(raw["step"])
            accepted = isinstance(event, InnerStepEvent) and event.candidate_outcome is Outcome.ACCEPTED
            state.consecutive_rejections = 0 if accepted else state.consecutive_rejections + isinstance(
                event, InnerStepEvent)
        else:
            state.outer_rounds += 1
            state.last_round_step = state.next_step
            state.consecutive_rejections = 0
        bar.on_event(event, state)
        if isinstance(event, InnerStepFailedEvent):
            state.consecutive_rejections += 1
        rows.append({"after": where, "paid": bar.calls, "expected": round(bar.plan.expected_calls)})
    return rows
