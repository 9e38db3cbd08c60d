"""One vocabulary for a candidate's outcome (rundir/outcomes.py): the terminal's progress lines, the event
log, the report's gate tables and its figure say accepted / rejected (incumbent kept) / invalid (not gated)
/ no candidate for the same outcome, and never the old words ("candidate kept" for a rejection,
"generator kept", "no candidate gated")."""

from __future__ import annotations

import asyncio
import html
import io
import json
import re
from pathlib import Path

from rich.console import Console

from decoevo.cli.run_progress import Plan, RunProgress, eta_seconds, fit, resume_line
from decoevo.lm.types import BackendRequest
from decoevo.report import build_report
from decoevo.report.render import render
from decoevo.rundir import InnerStepEvent, OuterRoundEvent, RunReader
from decoevo.rundir.outcomes import Outcome, label, outcome_of
from decoevo.testing import world
from decoevo.testing.scripted import ScriptedBackend
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

from .engine_helpers import toy_engine
from .test_cli_output import cli

OLD_WORDS = ("candidate kept", "generator kept", "no candidate gated", "[yellow]kept")


def test_outcome_of_reads_old_and_new_events_alike() -> None:
    assert outcome_of(True) is Outcome.ACCEPTED and outcome_of(False) is Outcome.REJECTED
    assert outcome_of(False, invalid="copy") is Outcome.INVALID and outcome_of(None) is Outcome.NO_CANDIDATE
    assert outcome_of(False, gated=False) is Outcome.NO_CANDIDATE
    old_inner = InnerStepEvent(step=1, accepted=False, note="no failures", solver_version=0)  # no outcome field
    assert old_inner.candidate_outcome is Outcome.NO_CANDIDATE
    old_invalid = InnerStepEvent.model_validate({"step": 2, "accepted": False, "invalid": "copy", "solver_version": 0})
    assert old_invalid.candidate_outcome is Outcome.INVALID
    assert OuterRoundEvent(round=0, accepted=False, generator_version=0).candidate_outcome is Outcome.REJECTED
    assert label(Outcome.REJECTED) == "rejected (incumbent kept)" and label(Outcome.INVALID) == "invalid (not gated)"


def _terminal_lines(out: str) -> dict[str, str]:
    """`step N` / `outer round N` -> the line saying what became of its candidate."""
    found = {}
    for line in out.splitlines():
        m = re.search(r"((?:step|outer round) \d+): (?:solver|generator)\b.*", line)
        if m:
            found[m.group(1)] = m.group(0)
    return found


def test_the_terminal_and_the_report_use_the_same_words(tmp_path: Path) -> None:
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        out = cli(*toy_run_args(f"{url}/v1", data, tmp_path / "runs", "w", steps=3), columns=200, tmp=tmp_path).stdout
    run = tmp_path / "runs" / "w"
    said = _terminal_lines(out)
    page = html.unescape(render(build_report([run])))
    seen: set[Outcome] = set()
    for e in RunReader(run).events():
        if isinstance(e, InnerStepEvent | OuterRoundEvent):
            where = f"step {e.step}" if isinstance(e, InnerStepEvent) else f"outer round {e.round}"
            words = label(e.candidate_outcome)
            assert e.outcome is e.candidate_outcome  # recorded in the event log as it happened
            assert words in said[where], (where, words, said.get(where))
            gate = "solver gate" if isinstance(e, InnerStepEvent) else "generator gate"
            number = e.step if isinstance(e, InnerStepEvent) else e.round
            table = page.split(f"<th>{gate}</th>", 1)[1].split("</table>", 1)[0]
            row = re.search(rf'<tr><td class="n">{number}</td>\s*<td><span class="badge[^"]*">([^<]*)</span>', table)
            assert row is not None and row.group(1) == words, (gate, number, row and row.group(1))
            seen.add(e.candidate_outcome)
    # the toy world accepts its first rewrite, repeats it (a copy: invalid) and its generator is rejected
    assert {Outcome.ACCEPTED, Outcome.INVALID, Outcome.REJECTED} <= seen, seen
    for outcome in seen:  # the figure's legend and description too
        assert label(outcome) in page
    for old in OLD_WORDS:
        assert old not in out and old not in page, old


def _rendered(progress: RunProgress, width: int) -> list[str]:
    console = Console(file=io.StringIO(), width=width, force_terminal=False, color_system=None)
    console.print(progress.progress.get_renderable())
    return console.file.getvalue().rstrip("\n").splitlines()  # type: ignore[attr-defined]


def test_the_progress_line_never_wraps_at_80_or_120_columns() -> None:
    for width in (80, 120):
        console = Console(file=io.StringIO(), width=width, force_terminal=True)
        bar = RunProgress(console, 40, "direct_audit s12", Plan(40, 0, 9.0, 12345.0), phase=lambda: "outer 3",
                          now=lambda: 100.0)
        bar.steps_done, bar.rounds_done, bar.calls, bar.hits, bar.tokens = 17, 3, 98765, 4321, 123_456_789
        bar.cost, bar.solver_accepts, bar.generator_accepts, bar.outer_rounds = 1234.5678, 12, 2, 3
        bar.started = 0.0
        bar._refresh()
        lines = _rendered(bar, width)
        assert len(lines) == 1 and len(lines[0]) <= width, (width, lines)
        assert "calls 98765" in lines[0] and "ETA ~" in lines[0], lines


def test_the_eta_shows_from_the_start() -> None:
    console = Console(file=io.StringIO(), width=120, force_terminal=True)
    clock = [0.0]
    bar = RunProgress(console, 4, "decoevo s0", Plan(4, 0, 1.0, 42.0), now=lambda: clock[0])
    assert bar.eta() == "ETA: ~42 calls"  # before any answer: the estimate
    clock[0] = 2.0
    bar.calls = 1
    assert bar.eta().startswith("ETA ~")  # the first paid call gives a rate
    assert eta_seconds(10.0, 1, 42.0, 0, 5) == 410.0
    # once a phase ended, the slower of the two paces: late calls take longer than early ones
    assert eta_seconds(10.0, 30, 42.0, 1, 5) == 40.0
    assert fit(["a", "bb", "ccc"], 4, " ") == "a bb" and fit(["long"], 1, " ") == "long"


def test_resume_says_where_it_starts_or_that_the_run_finished(tmp_path: Path) -> None:
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        cli(*toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=2), columns=120, tmp=tmp_path)
    run = tmp_path / "runs" / "r"
    assert "2 of 5 inner steps done, continuing with the next" in resume_line(run, 5)
    again = cli("resume", str(run), columns=120, tmp=tmp_path).stdout
    said = " ".join(again.split())
    assert f"{run} has already finished (2 inner steps; summary.json): nothing to resume" in said, again
    assert "decoevo export" in again


def _full_credit(request: BackendRequest) -> str:
    """The toy world, with a judge that fully credits every criterion: no batch ever has a failure."""
    title = (request.json_schema or {}).get("title", "")
    if title.startswith("JointVerdicts"):
        return json.dumps({"verdicts": [{"rationale": "met", "level": 4}] * int(title.removeprefix("JointVerdicts"))})
    if title == "CriterionVerdict":
        return json.dumps({"rationale": "met", "level": 4})
    return world.respond([m.as_dict() for m in request.messages], request.json_schema, request.params.sample_index)


def test_a_step_with_nothing_to_gate_is_no_candidate_not_a_rejection(tmp_path: Path) -> None:
    """Issue 46.2: a step whose batch had no failure proposes nothing; its event and the terminal line said
    "rejected (incumbent kept)" when the engine's `gated` was mutated to True (no test ran such a step)."""
    engine, _ = toy_engine(tmp_path, "skillopt", ScriptedBackend(_full_credit))
    result = asyncio.run(engine.run_async())
    steps = [e for e in RunReader(result.run_dir).events() if isinstance(e, InnerStepEvent)]
    assert len(steps) == 2, steps
    for e in steps:
        assert e.outcome is Outcome.NO_CANDIDATE and e.J_candidate is None, e
    raw = [json.loads(x) for x in (result.run_dir / "events.jsonl").read_text().splitlines()]
    assert [e["outcome"] for e in raw if e.get("event") == "inner_step"] == ["no_candidate"] * 2
    console = Console(file=io.StringIO(), width=200, force_terminal=False, color_system=None)
    progress = RunProgress(console, 2, "skillopt")
    for e in steps:
        progress.on_event(e, result.state)
    said = console.file.getvalue()  # type: ignore[attr-defined]
    assert "step 0: solver: no candidate" in said and label(Outcome.REJECTED) not in said, said
