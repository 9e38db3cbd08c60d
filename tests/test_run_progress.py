"""The run's progress bar: it counts outer rounds as well as inner steps, its timer runs until the run
ends (not until the step counter reads N/N), and it shows an ETA from the call estimate and the rate."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from decoevo.cli.run_progress import Plan, RunProgress, clock, eta_seconds
from decoevo.domain import Skill
from decoevo.engine.state import LoopState
from decoevo.lm import CallRecord
from decoevo.rundir import InnerStepEvent, OuterRoundEvent, StartEvent


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def state(**kw: int) -> LoopState:
    return LoopState(solver=Skill(kind="solver", version=0, text="s"),
                     generator=Skill(kind="generator", version=0, text="g"), **kw)


def call(cached: bool = False) -> CallRecord:
    return CallRecord(role="solve", model="m", key="k", cached=cached, prompt_tokens=10, completion_tokens=5)


def test_eta_from_the_call_estimate_then_from_the_phase_rate():
    assert eta_seconds(0.0, 0, 100, 0, 4) is None  # nothing measured
    assert eta_seconds(10.0, 2, 100, 0, 4) == pytest.approx(490.0)  # the first calls give a rate (issue 34)
    assert eta_seconds(10.0, 20, 100, 1, 4) == pytest.approx(40.0)  # 80 calls left at 2 per second
    assert eta_seconds(30.0, 150, 100, 3, 4) == pytest.approx(10.0)  # past the estimate: 1 phase at 10 s
    assert clock(75) == "1:15" and clock(3725) == "1:02:05"


@pytest.mark.parametrize("width", [80, 140])
def test_the_timer_runs_through_the_last_outer_round_and_stops_at_the_end(width):
    phase = {"now": "start"}
    now = Clock()
    console = Console(file=io.StringIO(), width=width, color_system=None)
    bar = RunProgress(console, 2, "decoevo s0", Plan(steps=2, expected_rounds=1.2, expected_calls=40),
                      phase=lambda: phase["now"], now=now)
    task = bar.progress.tasks[0]
    bar.on_event(StartEvent(method="decoevo", seed=0), state())
    assert "step 1/2" in bar.where() and bar.eta() == "ETA: ~40 calls"  # the estimate until a rate exists
    for _ in range(10):
        bar.on_call(call())
    now.t += 10
    assert bar.eta() == "ETA ~0:30"  # 30 expected calls left at one a second
    bar.on_event(InnerStepEvent(step=0, accepted=True, solver_version=1), state(next_step=0))
    phase["now"] = "outer 0"  # a round after step 0 (1-based: 1/2) belongs to that step
    assert bar.where().startswith(("1/2 outer 0", "step 1/2  outer 0")), bar.where()
    phase["now"] = "step 1"
    assert "2/2" in bar.where()
    bar.on_event(InnerStepEvent(step=1, accepted=False, solver_version=1), state(next_step=1))
    phase["now"] = "outer 0"  # the last step's outer round: every step is done, the run is not
    assert not task.finished and task.completed < task.total  # the old bar was full here and its timer stopped
    assert "2/2" in bar.where() and "outer" in bar.where() and "0" in bar.where().split("outer")[1]
    bar.on_event(OuterRoundEvent(round=0, generator_version=0), state(next_step=1, outer_rounds=1))
    phase["now"] = "outer 1"  # more rounds than expected: the total grows, the bar is still not full
    bar.on_event(OuterRoundEvent(round=1, generator_version=0), state(next_step=1, outer_rounds=2))
    assert not task.finished and task.total == task.completed + 1 == 5
    bar.finish()
    assert task.finished and task.completed == task.total == 4 and bar.eta() == ""
    assert "done" in bar.where()


def test_a_resume_counts_only_the_steps_left():
    from decoevo.rundir import ResumeEvent

    now = Clock()
    bar = RunProgress(Console(file=io.StringIO(), width=80), 8, "x", Plan(steps=8, expected_rounds=4,
                                                                          expected_calls=800), now=now)
    bar.on_event(ResumeEvent(next_step=6), state(next_step=6))
    assert bar.plan.expected_calls == pytest.approx(200) and bar.plan.expected_rounds == pytest.approx(1)
    assert bar.where() == "step 7/8" and bar.progress.tasks[0].total == 3


def test_eval_bar_counts_to_the_known_number_of_questions(tmp_path, monkeypatch):
    """`eval` over 4 test questions shows 4/4, not 4/? (the total is read before grading starts)."""
    import json

    from decoevo.cli import eval as eval_cmd
    from decoevo.testing.toy_server import write_toy_questions

    run = tmp_path / "run"
    run.mkdir()
    (run / "splits.json").write_text(json.dumps({"train": ["q0"], "test": ["q1", "q2", "q3", "q4"]}))
    assert eval_cmd.questions_in("test", None)(run) == 4
    data = write_toy_questions(tmp_path / "toy.jsonl", n=9)
    assert eval_cmd.questions_in("test", {"path": str(data), "format": "jsonl", "limit": 3})(run) == 3

    screen = Console(file=io.StringIO(), width=80, force_terminal=True, color_system=None)
    monkeypatch.setattr(eval_cmd, "console", screen)

    def job(run_dir, tick):
        for _ in range(4):
            tick()
        return "graded", True, {}

    eval_cmd._each_run([run], "grading", job, count=eval_cmd.questions_in("test", None))
    shown = screen.file.getvalue()
    assert "4/4" in shown and "/?" not in shown


def test_a_sweep_cell_bar_keeps_running_through_its_post_run_steps(tmp_path):
    """A cell whose run has finished training but is still being evaluated is not shown as done."""
    from decoevo.cli.sweep_progress import SweepProgress
    from decoevo.sweep.plan import Cell

    cell = Cell("healthbench", "decoevo", 0, config={}, total_steps=3)
    bars = SweepProgress(Console(file=io.StringIO(), width=120), tmp_path, 1)
    bars.started(cell, "new")
    run = cell.run_dir(tmp_path)
    run.mkdir(parents=True)
    (run / "summary.json").write_text("{}")
    bars.poll()
    (row, _), = bars.rows.values()
    task = bars.progress.tasks[row]
    assert task.fields["status"] == "post-run steps" and task.completed == 3 and not task.finished


def test_the_status_is_remade_at_most_ten_times_a_second_and_at_the_end() -> None:
    """Remade on every paid call, the status cost more CPU than a call's HTTP (issue 47): calls in the same
    tenth of a second update the counts, the status follows at the next tenth, an event, or the end."""
    now = Clock()
    bar = RunProgress(Console(file=io.StringIO(), width=140), 2, "x", Plan(steps=2, expected_calls=40), now=now)
    task = bar.progress.tasks[0]
    assert bar.progress.live.refresh_per_second <= 2  # rich's own redraws (its default: 10 a second)
    for _ in range(5):
        bar.on_call(call())
    assert "calls 1/" in task.fields["status"]  # the first call drew; four more in the same instant did not
    now.t += 0.25
    bar.on_call(call())
    assert "calls 6/" in task.fields["status"]
    bar.on_call(call(cached=True))
    bar.on_call(call())
    bar.__exit__(None, None, None)  # a run that stops without `finish` (a failure) still shows its last counts
    assert "calls 7/" in task.fields["status"] and "hits 1" in task.fields["status"]
    bar.on_call(call())
    bar.finish()
    assert "calls 8" in task.fields["status"]
