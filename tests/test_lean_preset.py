"""The `lean` preset (docs/cost.md, "A cheaper audit schedule"): a configuration that resolves, blind audits
that stop once they hold enough decided pairs, and a generator acceptance that still never reads the
solver's aggregate score."""

from __future__ import annotations

import json
from typing import Any

from decoevo.api import build_config
from decoevo.domain import Question
from decoevo.engine.audits import AuditStop, audit_order
from decoevo.engine.config import Hyper
from decoevo.presets import PRESETS
from tests.engine_helpers import forbid_solver_score, outer_round_events, toy_engine, toy_questions

SIZES = {"steps", "batch_size", "concurrency", "max_criteria"}


def lean_schedule() -> dict[str, Any]:
    """The preset's schedule keys (its sizes are the paper's: too large for the toy world)."""
    return {k: v for k, v in PRESETS["lean"]["hyper"].items() if k not in SIZES and not k.startswith("max_tokens_")}


def test_lean_resolves_to_the_paper_sizes_with_a_stopping_schedule(tmp_path):
    questions = tmp_path / "q.jsonl"
    questions.write_text("".join(json.dumps(q.model_dump(mode="json")) + "\n" for q in toy_questions(4)))
    args: dict[str, Any] = {"method": "decoevo", "seed": 0, "lm": None, "task": None, "task_spec_path": None,
                            "hyper": None, "splits": None, "budget": None, "base": None}
    lean = build_config(questions, preset="lean", **args)
    paper = build_config(questions, preset="paper", **args)
    assert (lean.hyper.probe_enough_pairs, lean.hyper.frozen_enough_pairs) == (2, 4)
    assert lean.hyper.reuse_gate_answers and lean.hyper.reuse_probe_draws
    assert lean.splits == paper.splits and lean.hyper.steps == paper.hyper.steps  # same sizes as `paper`
    # the paper's schedule is untouched: every question audited, nothing reused
    assert (paper.hyper.probe_enough_pairs, paper.hyper.frozen_enough_pairs) == (0, 0)
    assert not (paper.hyper.reuse_gate_answers or paper.hyper.reuse_probe_draws)
    assert Hyper().probe_enough_pairs == 0 and Hyper().frozen_enough_pairs == 0


def test_a_stopping_audit_takes_its_questions_in_rotating_chunks():
    qs = [Question.from_text(f"q{i}", f"question {i}?") for i in range(5)]
    assert audit_order(qs, AuditStop(), 2) == [qs]  # no stop rule: one chunk, in order
    chunks = audit_order(qs, AuditStop(enough=3, rotate=0), 2)  # ⌈3/2⌉ = 2 questions a chunk
    assert [[q.id for q in c] for c in chunks] == [["q0", "q1"], ["q2", "q3"], ["q4"]]
    rotated = audit_order(qs, AuditStop(enough=3, rotate=1), 2)  # the next round starts two further on
    assert [[q.id for q in c] for c in rotated] == [["q2", "q3"], ["q4", "q0"], ["q1"]]
    assert audit_order([], AuditStop(enough=3), 2) == [[]]


async def test_lean_on_the_toy_world_stops_its_blind_audits_and_never_reads_the_solver_score(tmp_path,
                                                                                           monkeypatch):
    forbid_solver_score(monkeypatch)
    schedule = {**lean_schedule(), "probe_enough_pairs": 1, "frozen_enough_pairs": 1}  # the toy has 2 probe qs
    engine, _ = toy_engine(tmp_path, "decoevo", **{**schedule, "steps": 6, "audit_every": 2, "max_stalls": 2})
    result = await engine.run_async()
    rounds = outer_round_events(result.run_dir)
    assert result.state.outer_rounds >= 1 and result.state.next_step == 6  # the run completed
    stopped = [r["audits_stopped"] for r in rounds if r.get("audits_stopped")]
    assert stopped, "the stop rule never fired"
    assert all(s["audited"] < s["of"] for r in stopped for s in r.values())
    # the stopped probe audit's records are the ones the round reports
    first = next(r for r in rounds if "probe" in r.get("audits_stopped", {}))
    records = (result.run_dir / f"audits/outer_{first['round']:03d}/contrastive_probe.jsonl").read_text()
    assert len(records.splitlines()) == first["contrastive_records"] >= 1


async def test_without_the_stop_rule_every_probe_question_is_audited(tmp_path):
    engine, _ = toy_engine(tmp_path, "decoevo", steps=6, audit_every=2, max_stalls=2)
    result = await engine.run_async()
    assert result.state.outer_rounds >= 1
    assert not any(r.get("audits_stopped") for r in outer_round_events(result.run_dir))


async def test_quiet_final_steps_leaves_out_the_rounds_no_solver_step_could_use(tmp_path):
    """`quiet_final_steps: 2` (lean): no round after either of the last two steps; 0 (paper): a round after every
    step when K = 1."""
    assert lean_schedule()["quiet_final_steps"] == 2 and Hyper().quiet_final_steps == 0
    quiet, _ = toy_engine(tmp_path, "decoevo", run_name="quiet", steps=6, audit_every=1, quiet_final_steps=2)
    loud, _ = toy_engine(tmp_path, "decoevo", run_name="loud", steps=6, audit_every=1)
    quiet_result, loud_result = await quiet.run_async(), await loud.run_async()
    assert quiet_result.state.next_step == loud_result.state.next_step == 6
    assert (quiet_result.state.outer_rounds, loud_result.state.outer_rounds) == (4, 6)


def test_the_lean_bench_reads_non_inferiority_from_the_interval_of_the_loss():
    """bench/cost/lean_schedule.py: non-inferior only when the paired interval of lean − paper lies above −2."""
    from bench.cost.lean_schedule import compare

    def cells(lean_gold: list[float]) -> list[dict[str, Any]]:
        out = []
        for seed, lg in enumerate(lean_gold):
            for label, gold, tokens in (("skillopt", 40.0, 100), ("paper", 50.0 + seed, 300), ("lean", lg, 140)):
                out.append({"world": 1, "seed": seed, "label": label, "gold": gold, "tokens": tokens,
                            "outer_rounds": 2, "generator_accepts": 1})
        return out

    kept = compare(cells([50.0, 51.5, 52.2]))  # lean − paper: 0, +0.5, +0.2
    assert kept["non_inferior"] is True and kept["lean"]["tokens_ratio"]["median"] == 1.4
    assert kept["lean"]["within_target"] == 3 and kept["paper"]["within_target"] == 0
    lost = compare(cells([47.0, 49.5, 49.0]))  # lean − paper: −3, −1.5, −3: a loss beyond the margin
    assert lost["non_inferior"] is False and lost["lean_minus_paper"]["mean"] == -2.5


def test_decoevo_run_preset_lean_runs_on_the_toy_world(tmp_path):
    """`decoevo run --preset lean` as users type it, against the toy world behind a local server (the preset's
    sizes are the paper's, so the splits and steps are set down to the toy's): the run finishes with the lean
    schedule in its configuration."""
    import os
    import subprocess
    import sys

    import yaml

    from decoevo.testing.server import serve_app
    from tests.test_kill_resume import toy_server

    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps({"id": q.id, "prompt": q.turns[0].content}) + "\n" for q in toy_questions()))
    with serve_app(toy_server().app()) as url:
        done = subprocess.run(
            [sys.executable, "-m", "decoevo", "run", "--preset", "lean", "--base-url", f"{url}/v1", "--model", "toy",
             "--data", str(data), "--task", "healthbench", "--runs-root", str(tmp_path / "runs"), "--name", "lean",
             "--set", "splits={pilot: 0, train: 6, probe: 2, solver_gate: 3, generator_gate: 3, diagnostic: 0, "
                      "test: 0}",
             "--set", "hyper={steps: 4, batch_size: 2, audit_every: 2}"],
            env={**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite")}, capture_output=True, text=True,
            timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    run = tmp_path / "runs" / "lean"
    hyper = yaml.safe_load((run / "config.yaml").read_text())["hyper"]
    assert {k: hyper[k] for k in lean_schedule() if k not in ("audit_every",)} == {
        k: v for k, v in lean_schedule().items() if k != "audit_every"}
    summary = json.loads((run / "summary.json").read_text())
    assert summary["status"] == "finished" and summary["steps_done"] == 4 and summary["outer_rounds"] >= 1
