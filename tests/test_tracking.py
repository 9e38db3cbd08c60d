"""MLflow tracking as a run callback, read back with MlflowClient from the store a fresh install uses: the
SQLite file beside the runs (no environment switch; MLflow 3 refuses its file store without one)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

import decoevo
from decoevo.cli import app
from decoevo.rundir import RunReader
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions
from decoevo.tracking import MlflowTracker, default_store, flatten

from .result_files import result_file

pytest.importorskip("uvicorn")
mlflow_tracking = pytest.importorskip("mlflow.tracking")
SPLITS = {"train": 6, "probe": 2, "solver_gate": 3, "generator_gate": 3, "test": 0}
HYPER = {"steps": 3, "batch_size": 2, "audit_every": 1, "rollouts": 4}


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    for name in ("MLFLOW_TRACKING_URI", "MLFLOW_ALLOW_FILE_STORE", "DECOEVO_TRACK", "DECOEVO_TRACK_URI"):
        monkeypatch.delenv(name, raising=False)
    return f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"


def only_run(uri: str) -> tuple[object, object]:
    client = mlflow_tracking.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("decoevo")
    (run,) = client.search_runs([experiment.experiment_id])
    return client, run


def test_api_run_logged_to_mlflow(tmp_path: Path, store: str) -> None:
    questions = [json.loads(line) for line in write_toy_questions(tmp_path / "toy.jsonl").read_text().splitlines()]
    run_dir = tmp_path / "run"
    store = default_store(tmp_path)  # no URI given: the SQLite file beside the run
    with serve_app(toy_server().app()) as url:
        tracker = MlflowTracker(run_dir)
        result = decoevo.optimize(questions, lm=decoevo.ModelSpec(backend="openai", model="toy", base_url=f"{url}/v1"),
                                  task="healthbench", splits=SPLITS, hyper=HYPER, seed=3, run_dir=run_dir,
                                  callbacks=[tracker])
        tracker.close()
    client, run = only_run(store)
    data = run.data
    assert run.info.status == "FINISHED"
    assert data.tags["decoevo.method"] == "decoevo" and data.tags["decoevo.seed"] == "3"
    assert data.tags["decoevo.run_dir"] == str(run_dir.resolve())
    assert data.params["hyper.steps"] == "3" and data.params["splits.train"] == "6"
    assert data.params["lm.models.default.model"] == "toy" and data.params["method"] == "decoevo"
    events = RunReader(run_dir).events()
    inner = [e for e in events if e.event == "inner_step"]
    outer = [e for e in events if e.event == "outer_round"]
    history = client.get_metric_history(run.info.run_id, "J_candidate")
    assert [m.step for m in history] == [e.step for e in inner if e.J_candidate is not None]
    assert [m.value for m in history] == pytest.approx([e.J_candidate for e in inner if e.J_candidate is not None])
    accepted = client.get_metric_history(run.info.run_id, "solver_accepted")
    assert [bool(m.value) for m in accepted] == [e.accepted for e in inner]
    deltas = {k for e in outer for k in e.deltas}
    assert deltas and all(f"audit.delta.{k}" in data.metrics for k in deltas)
    ledger = result.ledger.total()
    assert data.metrics["usage.calls_paid"] == ledger.calls and data.metrics["usage.calls_cached"] == ledger.cache_hits
    assert data.metrics["usage.tokens_paid"] == ledger.prompt_tokens + ledger.completion_tokens

    def paths(folder: str) -> set[str]:
        return {a.path for a in client.list_artifacts(run.info.run_id, folder)}

    solver_versions = {f"skills/solver/v{v:03d}.md" for v in RunReader(run_dir).versions("solver")}
    assert len(solver_versions) >= 2 and paths("skills/solver") == solver_versions  # every accepted version
    assert paths("decisions") == {f"decisions/round_{e.round:03d}.json" for e in outer}
    top = paths("")
    assert {"final_solver_skill.md", "summary.json", "provenance.json"} <= top
    local = client.download_artifacts(run.info.run_id, "final_solver_skill.md", str(tmp_path / "dl"))
    assert Path(local).read_text() == (run_dir / "final_solver_skill.md").read_text()
    assert (tmp_path / "mlflow.db").is_file() and (tmp_path / "mlartifacts").is_dir()  # nothing in the cwd


def test_cli_track_and_resume_continue_one_mlflow_run(tmp_path: Path, store: str) -> None:
    runner = CliRunner()
    data = write_toy_questions(tmp_path / "toy.jsonl")
    run_dir = tmp_path / "runs" / "r"
    with serve_app(toy_server().app()) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=2)
        result = runner.invoke(app, [*args, "--track", "mlflow", "--track-uri", store])
        assert result.exit_code == 0, result.output
        client, first = only_run(store)
        assert first.info.status == "FINISHED"
        said = " ".join(result.output.split())  # where it logged and how to look (issue 27, item 7)
        assert f"run {first.info.run_id}" in said and f"mlflow ui --backend-store-uri {store}" in said
        result = runner.invoke(app, ["resume", str(run_dir), "--track", "mlflow", "--track-uri", store])
        assert result.exit_code == 0, result.output
    client, run = only_run(store)  # the resume continued the same MLflow run
    assert run.info.run_id == first.info.run_id and run.info.status == "FINISHED"
    assert run.data.params["seed"] == "3" and run.data.tags["decoevo.method"] == "decoevo"
    assert [m.step for m in client.get_metric_history(run.info.run_id, "solver_version")] == [0, 1]


def test_budget_stopped_run_still_logs_its_final_skill(tmp_path: Path, store: str) -> None:
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "b", steps=3)
        result = CliRunner().invoke(app, [*args, "--max-calls", "40", "--track", "mlflow", "--track-uri", store])
    assert result.exit_code == 0, result.output
    assert RunReader(tmp_path / "runs" / "b").status() == "budget_stop"
    client, run = only_run(store)
    assert run.info.status == "FINISHED"
    assert {"final_solver_skill.md", "summary.json"} <= {a.path for a in client.list_artifacts(run.info.run_id)}
    summary = RunReader(tmp_path / "runs" / "b").summary()
    assert summary is not None and run.data.metrics["usage.calls_paid"] == summary.usage["calls"]


def test_bad_track_options_are_one_line_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["run", "--track", "wandb", "--runs-root", str(tmp_path)])
    assert result.exit_code == 2 and "--track 'wandb'" in result.output
    result = runner.invoke(app, ["run", "--track-uri", "file:/x", "--runs-root", str(tmp_path)])
    assert result.exit_code == 2 and "--track-uri needs --track mlflow" in result.output


def test_flatten_keeps_parameters_short() -> None:
    flat = flatten({"hyper": {"epsilon": 0.02, "ks": [1, 2]}, "skill": "x" * 2000, "none": None, "empty": {}})
    assert flat["hyper.epsilon"] == "0.02" and flat["hyper.ks"] == "[1, 2]" and flat["none"] == "null"
    assert len(flat["skill"]) == 500 and flat["empty"] == "{}"


@pytest.mark.slow  # a tracked sweep (~13 s); tracked runs and resumes stay in the default run
def test_sweep_track_gives_each_cell_its_mlflow_run(tmp_path: Path, store: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from decoevo.tracking import TRACK_ENV, TRACK_URI_ENV

    from .sweep_helpers import served_toy, sweep, write_spec

    for name in (TRACK_ENV, TRACK_URI_ENV):  # the sweep sets them for its cells; restored after the test
        monkeypatch.setenv(name, "")
    with served_toy() as server:
        spec = write_spec(tmp_path / "grid.yaml", server.url, ["decoevo"], [0, 1])
        code, output = sweep(tmp_path / "SW", "--spec", spec, "--workers", "2", "--track", "mlflow",
                             "--track-uri", store)
    assert code == 0, output
    client = mlflow_tracking.MlflowClient(tracking_uri=store)
    runs = client.search_runs([client.get_experiment_by_name("decoevo").experiment_id])
    assert sorted(r.data.tags["decoevo.seed"] for r in runs) == ["0", "1"]
    assert {r.info.status for r in runs} == {"FINISHED"}
    assert all(client.get_metric_history(r.info.run_id, "solver_version") for r in runs)


def test_two_trackers_racing_to_create_the_experiment_both_get_it(tmp_path, monkeypatch):
    """Sweep cells start together: the one that loses the race to create the experiment uses it."""
    import mlflow.tracking

    from decoevo.tracking import MlflowTracker

    monkeypatch.delenv("MLFLOW_ALLOW_FILE_STORE", raising=False)
    uri = default_store(tmp_path)
    real = mlflow.tracking.MlflowClient.get_experiment_by_name
    calls = {"n": 0}

    def late(self, name):  # the first lookup misses; another cell creates it before our create
        calls["n"] += 1
        if calls["n"] == 1:
            mlflow.tracking.MlflowClient(uri).create_experiment(name)
            return None
        return real(self, name)

    monkeypatch.setattr(mlflow.tracking.MlflowClient, "get_experiment_by_name", late)
    tracker = MlflowTracker(tmp_path / "run", tracking_uri=uri)
    assert tracker.run_id and calls["n"] == 2
    tracker.close()


def test_cli_default_store_and_eval_scores_reach_the_runs_mlflow_run(tmp_path: Path, store: str) -> None:
    """No --track-uri, no MLFLOW_* variable: the run lands in RUNS/mlflow.db, and `decoevo eval` adds its
    scores to the same MLflow run."""
    runner = CliRunner()
    data = write_toy_questions(tmp_path / "toy.jsonl")
    runs = tmp_path / "runs"
    with serve_app(toy_server().app()) as url:
        args = toy_run_args(f"{url}/v1", data, runs, "e", steps=1, sets=("splits.test=2",))
        result = runner.invoke(app, [*args, "--track", "mlflow"])
        assert result.exit_code == 0, result.output
        result = runner.invoke(app, ["eval", str(runs / "e"), "--grader-base-url", f"{url}/v1",
                                     "--grader-model", "toy"])
        assert result.exit_code == 0, result.output
    graded = result_file(runs / "e")
    record = json.loads(graded.read_text())
    client, run = only_run(default_store(runs))
    assert run.data.metrics["eval.test.score"] == pytest.approx(record["score"])
    assert run.data.metrics["eval.test.n_graded"] == record["n_graded"] == 2
    assert f"eval/{graded.name}" in {a.path for a in client.list_artifacts(run.info.run_id, "eval")}
    # the grader's labels travel with its scores: here the grader is the run's own model
    assert record["self_graded"] is True
    assert run.data.tags["eval.test.self_graded"] == "true"
    assert run.data.tags["eval.test.grader_independence"] == "self-graded, not an independent result"
    assert run.data.tags["eval.test.grader_model"] == record["grader_model"]


def test_a_file_store_mlflow_refuses_is_one_line_naming_the_fix(tmp_path: Path, store: str) -> None:
    import mlflow

    if int(mlflow.__version__.split(".")[0]) < 3:
        pytest.skip("MLflow 2 takes its file store")
    result = CliRunner().invoke(app, ["run", "--track", "mlflow", "--track-uri", f"file:{tmp_path / 'mlruns'}",
                                      "--runs-root", str(tmp_path / "runs")])
    assert result.exit_code == 2, result.output
    assert "MLflow 3 refuses its file store" in result.output and "bug" not in result.output
    assert not (tmp_path / "runs").exists()


def test_mlflow_skinny_without_sqlalchemy_is_told_what_to_install(tmp_path: Path, store: str) -> None:
    """mlflow-skinny alone (no SQLAlchemy) cannot keep the default SQLite store: one line with the fix."""
    import subprocess
    import sys

    code = ("import sys; sys.modules['sqlalchemy'] = sys.modules['alembic'] = None; "
            "from decoevo.cli import app; sys.argv = ['decoevo', *sys.argv[1:]]; app()")
    done = subprocess.run([sys.executable, "-c", code, "run", "--track", "mlflow", "--runs-root",
                           str(tmp_path / "runs")], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    output = " ".join((done.stdout + done.stderr).split())  # the terminal's line breaks fall anywhere
    assert done.returncode == 2, output
    assert "needs SQLAlchemy and Alembic" in output and "pip install 'decoevo[mlflow]'" in output
    assert "bug" not in output and "Traceback" not in output
