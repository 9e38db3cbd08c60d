"""`decoevo sweep`: grids of real runs against the toy world served over HTTP (each cell is a child process).

Covered: a 2×2 grid completes with splits matched across methods; a second invocation reruns nothing;
a killed sweep's unfinished cell is resumed; a failing cell is reported while the others finish, and its
budget-matched dependent is not run; budget_matched waits for its paired DecoEvo cell; the post-run
step hook; spec errors exit 2 naming the file and key.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from decoevo.cli.sweep_cell import run_cell
from decoevo.errors import ConfigError
from decoevo.sweep import build_spec, plan
from decoevo.sweep.cell import CellRequest, child_env
from decoevo.sweep.executors import split_cores
from decoevo.sweep.plan import CellConflict, action_for, with_threads
from decoevo.sweep.steps import check_available
from decoevo.testing.toy_server import write_toy_questions

from .sweep_helpers import BROKEN, events, file_stamps, served_toy, status, sweep, write_spec

pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def server():
    with served_toy() as fake:
        yield fake


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "cache.sqlite"
    monkeypatch.setenv("DECOEVO_CACHE", str(path))  # cell processes inherit it
    return path


def test_grid_runs_with_matched_splits_and_a_second_sweep_reruns_nothing(tmp_path, server, cache):
    spec = write_spec(tmp_path / "grid.yaml", server.url, ["decoevo", "skillopt"], [0, 1])
    sweep_dir = tmp_path / "SW"
    code, out = sweep(sweep_dir, "--spec", spec)
    assert code == 0, out
    assert f"decoevo report {sweep_dir}" in " ".join(out.split())  # the next step, named (issue 27, item 7)
    cells = status(sweep_dir)
    assert sorted(cells) == ["toy/decoevo-s0", "toy/decoevo-s1", "toy/skillopt-s0", "toy/skillopt-s1"]
    assert all(c["state"] == "done" and c["action"] == "new" for c in cells.values()), cells
    runs = sweep_dir / "runs" / "toy"
    for cell in cells.values():
        run = sweep_dir / cell["run_dir"]
        config = yaml.safe_load((run / "config.yaml").read_text())
        assert (config["method"], config["seed"]) == (cell["method"], cell["seed"])
        assert (run / "summary.json").is_file() and (run / "sweep.log").is_file()
    for seed in (0, 1):  # matched: the same questions in every split for both methods of a seed
        a = json.loads((runs / f"decoevo-s{seed}" / "splits.json").read_text())
        b = json.loads((runs / f"skillopt-s{seed}" / "splits.json").read_text())
        assert a == b
    assert json.loads((runs / "decoevo-s0/splits.json").read_text()) != \
        json.loads((runs / "decoevo-s1/splits.json").read_text())
    resolved = yaml.safe_load((sweep_dir / "sweep.yaml").read_text())
    assert Path(resolved["benchmarks"][0]["data"]).is_absolute()

    requests, stamps = len(server.requests), file_stamps(sweep_dir / "runs")
    code, out = sweep(sweep_dir)  # no --spec: continues from SWEEP/sweep.yaml
    assert code == 0, out
    assert len(server.requests) == requests, "a finished cell made model calls again"
    assert file_stamps(sweep_dir / "runs") == stamps, "a finished cell's files were rewritten"
    assert all(c["state"] == "done" and c["action"] == "skip" for c in status(sweep_dir).values())
    assert "not rerun" in out


def test_budget_matched_waits_for_decoevo_and_a_failed_cell_does_not_stop_the_others(tmp_path, server, cache):
    write_toy_questions(tmp_path / "toy.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text("".join(json.dumps({"id": f"b{i}", "prompt": f"{BROKEN} question {i}"}) + "\n"
                           for i in range(16)))
    benchmarks = [{"name": "good", "data": "toy.jsonl", "task": "healthbench"},
                  {"name": "bad", "data": "bad.jsonl", "task": "healthbench"}]
    # budget_matched is listed first; the plan must still run the decoevo cell it pairs with first
    spec = write_spec(tmp_path / "grid.yaml", server.url, ["budget_matched", "decoevo"], [0], benchmarks)
    sweep_dir = tmp_path / "SW"
    code, out = sweep(sweep_dir, "--spec", spec, "--workers", "2")
    assert code == 1, out
    cells = status(sweep_dir)
    assert cells["good/decoevo-s0"]["state"] == "done" and cells["good/budget_matched-s0"]["state"] == "done"
    assert cells["bad/decoevo-s0"]["state"] == "failed"
    assert "model call failed" in cells["bad/decoevo-s0"]["error"] and "HTTP 400" in cells["bad/decoevo-s0"]["error"]
    assert cells["bad/budget_matched-s0"]["state"] == "failed"
    assert "not run" in cells["bad/budget_matched-s0"]["error"]
    assert not (sweep_dir / "runs/bad/budget_matched-s0").exists()
    assert "failed bad/decoevo-s0" in " ".join(out.split())

    good = sweep_dir / "runs" / "good"
    paired_finish = next(e["t"] for e in events(good / "decoevo-s0") if e["event"] == "finish")
    matched_start = next(e["t"] for e in events(good / "budget_matched-s0") if e["event"] == "start")
    assert matched_start >= paired_finish
    config = yaml.safe_load((good / "budget_matched-s0" / "config.yaml").read_text())
    assert config["budget"]["match_run"] == str((good / "decoevo-s0").resolve())


@pytest.mark.slow  # (~15 s) a killed run's resume is tested in the default run
def test_a_killed_sweep_resumes_its_unfinished_cell(tmp_path, server, cache, monkeypatch):
    spec = write_spec(tmp_path / "grid.yaml", server.url, ["decoevo"], [0],
                      hyper={"steps": 3, "batch_size": 2, "audit_every": 1, "rollouts": 4})
    sweep_dir, run = tmp_path / "SW", tmp_path / "SW" / "runs" / "toy" / "decoevo-s0"
    driver = subprocess.Popen([sys.executable, "-m", "decoevo", "sweep", str(sweep_dir), "--spec", str(spec)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60  # kill once the first step is checkpointed, so resume has work to skip
    while not (run / "checkpoint.json").exists() and driver.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    driver.send_signal(signal.SIGKILL)  # the driver only: its cell process must not run on as an orphan
    driver.wait()
    seen = -1
    while seen != len(server.requests) and time.monotonic() < deadline:
        seen = len(server.requests)
        time.sleep(1.0)
    assert (run / "config.yaml").is_file() and not (run / "summary.json").exists()

    code, out = sweep(sweep_dir)
    assert code == 0, out
    assert status(sweep_dir)["toy/decoevo-s0"]["action"] == "resume"
    kinds = [e["event"] for e in events(run)]
    assert "resume" in kinds and kinds[-1] == "finish" and kinds.count("inner_step") == 3

    # An uninterrupted reference, paid afresh, and described by flags alone: the same cell configuration.
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "fresh.sqlite"))
    code, out = sweep(tmp_path / "REF", "--methods", "decoevo", "--seeds", "0", "--data", tmp_path / "toy.jsonl",
                      "--task", "healthbench", "--preset", "default", "--base-url", f"{server.url}/v1",
                      "--model", "toy", "--evaluate", "none", "--set", "lm.models.default.max_retries=0",
                      "--set", "splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 0}",
                      "--set", "hyper={steps: 3, batch_size: 2, audit_every: 1, rollouts: 4}")
    assert code == 0, out
    ref_run = tmp_path / "REF/runs/toy/decoevo-s0"
    assert yaml.safe_load((ref_run / "config.yaml").read_text()) == yaml.safe_load((run / "config.yaml").read_text())
    reference = json.loads((ref_run / "checkpoint.json").read_text())["state"]
    resumed = json.loads((run / "checkpoint.json").read_text())["state"]
    assert resumed["solver"] == reference["solver"] and resumed["generator"] == reference["generator"]


# ---- the post-run step hook -----------------------------------------------------------------------

@pytest.fixture
def fake_eval(monkeypatch):
    """Replaces the library's evaluation with one that grades nothing but writes RUN/eval/test.json
    (or fails as an unreachable grader does)."""
    import decoevo.api

    behaviour = {"fail": False, "calls": []}

    async def evaluate_async(run_dir, **_):
        behaviour["calls"].append(run_dir)
        if behaviour["fail"]:
            raise ConfigError("the grader is unreachable")
        summary = json.loads((run_dir / "summary.json").read_text())  # runs after training
        (run_dir / "eval").mkdir(exist_ok=True)
        (run_dir / "eval" / "test.json").write_text(json.dumps({"name": "test", "method": summary["method"]}))
        return {"n_graded": 1}

    monkeypatch.setattr(decoevo.api, "evaluate_async", evaluate_async)
    return behaviour


def test_post_run_steps_run_after_training_and_only_when_missing(tmp_path, server, cache, fake_eval):
    splits = {"train": 6, "solver_gate": 3, "test": 2, "probe": 0, "generator_gate": 0}
    spec, _ = build_spec(tmp_path / "SW", write_spec(tmp_path / "grid.yaml", server.url, ["skillopt"], [0],
                                                     splits=splits, evaluate=["test"]))
    check_available(spec.evaluate)
    (cell,) = plan(spec, tmp_path / "SW")
    run_dir = cell.run_dir(tmp_path / "SW")
    request = CellRequest(cell_id=cell.id, run_dir=str(run_dir), config=cell.config, threads=1,
                          evaluate=spec.evaluate)
    assert action_for(cell, tmp_path / "SW", spec.evaluate) == "new"
    outcome = run_cell(request)
    assert outcome.ok and outcome.trained == "new" and outcome.steps_run == ["test"], outcome
    assert json.loads((run_dir / "eval/test.json").read_text())["method"] == "skillopt"
    assert action_for(cell, tmp_path / "SW", spec.evaluate) == "skip"

    (run_dir / "eval/test.json").unlink()  # a finished run whose evaluation is missing: evaluate only
    assert action_for(cell, tmp_path / "SW", spec.evaluate) == "evaluate"
    fake_eval["fail"] = True
    outcome = run_cell(request)
    assert not outcome.ok and outcome.trained == "none" and "grader is unreachable" in outcome.error
    fake_eval["fail"] = False
    outcome = run_cell(request)
    assert outcome.ok and outcome.trained == "none" and outcome.steps_run == ["test"]
    assert len(fake_eval["calls"]) == 3


def test_an_unknown_post_run_step_is_refused_before_any_training():
    with pytest.raises(Exception, match="the post-run steps are test, dynamics, alignment"):
        check_available(["test", "vibes"])
    check_available([])
    check_available(["test", "dynamics", "alignment"])


# ---- planning, threads, errors ----------------------------------------------------------------------

def test_plan_orders_dependencies_and_detects_a_changed_configuration(tmp_path):
    spec, _ = build_spec(tmp_path / "SW", write_spec(tmp_path / "g.yaml", "http://127.0.0.1:9",
                                                     ["budget_matched", "skillopt", "decoevo"], [0, 1]))
    cells = plan(spec, tmp_path / "SW")
    ids = [c.id for c in cells]
    assert ids == ["toy/skillopt-s0", "toy/decoevo-s0", "toy/budget_matched-s0",
                   "toy/skillopt-s1", "toy/decoevo-s1", "toy/budget_matched-s1"]
    assert cells[2].depends_on == ("toy/decoevo-s0",) and cells[0].depends_on == ()
    assert cells[2].config["budget"]["match_run"] == str((tmp_path / "SW/runs/toy/decoevo-s0").resolve())

    run = cells[0].run_dir(tmp_path / "SW")
    run.mkdir(parents=True)
    stored = with_threads({**cells[0].config, "hyper": {**cells[0].config["hyper"], "steps": 9}}, 4)
    (run / "config.yaml").write_text(yaml.safe_dump(stored))
    with pytest.raises(CellConflict, match=r"differs at: hyper\.steps\)"):
        action_for(cells[0], tmp_path / "SW", [])
    (run / "config.yaml").write_text(yaml.safe_dump(with_threads(cells[0].config, 4)))  # threads do not count
    assert action_for(cells[0], tmp_path / "SW", []) == "resume"


def test_cores_are_split_between_workers_and_reach_the_model():
    assert split_cores(8, cells=6, workers=None, threads=None) == (6, 1)
    assert split_cores(8, cells=2, workers=None, threads=None) == (2, 4)
    assert split_cores(2, cells=4, workers=None, threads=None) == (2, 1)
    assert split_cores(2, cells=1, workers=None, threads=None) == (1, 2)
    assert split_cores(8, cells=6, workers=3, threads=None) == (3, 2)
    config = {"lm": {"models": {"default": {"backend": "local"},
                                "remote": {"backend": "openai", "base_url": "http://x/v1"}}}}
    threaded = with_threads(config, 3)["lm"]["models"]
    assert threaded["default"]["n_threads"] == 3 and "n_threads" not in threaded["remote"]
    request = CellRequest(cell_id="b/m-s0", run_dir="/x", config={}, threads=3, env={"DECOEVO_CACHE": "/c"})
    env = child_env(request)
    assert env["OMP_NUM_THREADS"] == "3" and env["DECOEVO_CACHE"] == "/c"


@pytest.mark.parametrize("change,fragment", [
    ({"hyperr": {}}, "hyperr: unknown key; did you mean hyper?"),
    ({"benchmarks": [{"name": "t", "data": "toy.jsonl", "taks": "x"}]}, "benchmarks.0.taks: unknown key; did you "
                                                                         "mean task? (the keys here: name, data"),
    ({"methods": ["decoevo", "nope"]}, "unknown method 'nope'"),
    ({"seeds": [0, 0]}, "seed 0 is listed twice"),
    ({"evaluate": ["vibes"]}, "unknown evaluate step 'vibes'"),
    ({"benchmarks": [{"name": "a b", "data": "toy.jsonl"}]}, "benchmarks.0.name"),
    ({"benchmarks": [{"name": "t", "data": "missing.jsonl"}]}, "missing.jsonl: file not found"),
    ({"benchmarks": [{"name": "t", "data": "toy.jsonl", "format": "csv"}]}, "(benchmark 't')"),
    ({"hyper": {"stepz": 2}}, "hyper.stepz: unknown key; did you mean hyper.steps?"),
    ({"splits": {"train": 500}}, "the data has 16"),
    ({"methods": ["budget_matched"]}, "add decoevo to methods"),
    ({"evaluate": ["test"]}, "splits.test is 0"),
])
def test_spec_errors_exit_2_naming_the_file_and_key(tmp_path, change, fragment):
    spec = write_spec(tmp_path / "grid.yaml", "http://127.0.0.1:9", ["decoevo"], [0])
    raw = yaml.safe_load(spec.read_text())
    spec.write_text(yaml.safe_dump({**raw, **change}))
    code, out = sweep(tmp_path / "SW", "--spec", spec)
    text = " ".join(out.split())
    assert code == 2, out
    assert fragment in text and str(spec) in text, out
    assert "Traceback" not in out
    assert not (tmp_path / "SW" / "runs").exists()


def test_flags_alone_make_a_grid(tmp_path):
    spec, source = build_spec(tmp_path / "SW", None, overrides={"methods": ["decoevo", "skillopt"], "seeds": [0, 1],
                                                                  "hyper": {"steps": 1}})
    assert spec.methods == ["decoevo", "skillopt"] and spec.seeds == [0, 1] and spec.preset == "quick"
    assert spec.benchmarks[0].format == "healthbench" and source == "the command-line flags"
    assert len(plan(spec, tmp_path / "SW")) == 4
    code, out = sweep(tmp_path / "SW", "--format", "healthbench")
    assert code == 2 and "pass --data too" in out


def test_ray_without_the_extra_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    spec = write_spec(tmp_path / "grid.yaml", "http://127.0.0.1:9", ["skillopt"], [0])
    code, out = sweep(tmp_path / "SW", "--spec", spec, "--ray-address", "auto")
    assert code == 2 and "pip install 'decoevo[ray]'" in " ".join(out.split()), out


@pytest.mark.slow  # (~12 s) Budget-Matched's stop rule is unit-tested in the default run
def test_budget_matched_reaches_decoevo_effective_usage_in_a_shared_cache_sweep(tmp_path, server, cache):
    """Issue 9 item 1: with a shared cache DecoEvo inherits SkillOpt's first steps; the control must get
    DecoEvo's effective usage (paid + inherited) as its cap and be stopped on that same quantity."""
    write_toy_questions(tmp_path / "many.jsonl", n=60)  # enough training batches that the control keeps paying
    benchmarks = [{"name": "toy", "data": "many.jsonl", "task": "healthbench"}]
    # SkillOpt's two steps are DecoEvo's first two (audit after step 2): DecoEvo inherits them
    spec = write_spec(tmp_path / "grid.yaml", server.url, ["skillopt", "decoevo", "budget_matched"], [0], benchmarks,
                      splits={"train": 40, "probe": 2, "solver_gate": 3, "generator_gate": 3},
                      hyper={"steps": 2, "batch_size": 2, "audit_every": 2, "rollouts": 4, "budget_step_cap": 30})
    sweep_dir = tmp_path / "SW"
    code, out = sweep(sweep_dir, "--spec", spec, "--workers", 1)  # in plan order: SkillOpt pays first
    assert code == 0, out
    runs = sweep_dir / "runs" / "toy"

    def effective(run: str) -> tuple[int, int, dict]:
        t = json.loads((runs / run / "ledger.json").read_text())["total"]
        return t["calls"] + t["inherited_calls"], t["tokens"] + t["inherited_tokens"], t

    deco_calls, deco_tokens, deco = effective("decoevo-s0")
    control_calls, control_tokens, control = effective("budget_matched-s0")
    assert deco["inherited_calls"] >= 0.2 * deco_calls, ("the test needs DecoEvo to inherit from SkillOpt", deco)
    summary = json.loads((runs / "budget_matched-s0" / "summary.json").read_text())
    assert summary["status"] == "budget_stop", (summary, deco_calls, control_calls)
    assert f"of {deco_calls} calls" in summary["stopped"] or f"of {deco_tokens} tokens" in summary["stopped"]
    # one inner step of the control: its batch (solve, rubric, judge), a rewrite, the gate's rollouts
    step_calls = 2 * 3 + 1 + 4 * 3 * 3
    assert control_calls >= deco_calls - step_calls or control_tokens >= deco_tokens, (deco, control)
    assert control_calls <= deco_calls + step_calls, (deco, control)
