"""`decoevo compare` as a regression guard: --fail-under and --fail-on-regression exit 1 with one line naming
the questions, and the CI recipe in docs/ci/decoevo-guard.yml does what it says. Its "decoevo guard" step is
run as written (bash, the job's env with the toy world in place of the repository's variables): it passes on
the prompt the run shipped and fails on a seeded regression (a degraded prompt)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.evaluation.guard import check
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

pytest.importorskip("uvicorn")
runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "docs" / "ci" / "decoevo-guard.yml"
SPLITS = "splits={train: 4, probe: 2, solver_gate: 3, generator_gate: 3, test: 4}"
DEGRADED = "Answer briefly."  # the toy world's answers lose their safety advice: every question scores lower


def _said(output: str) -> str:
    return " ".join(output.split())


def _error_lines(output: str) -> list[str]:
    """The error messages, each one line unwrapped (the terminal's width wraps a long one; an error is the
    last thing printed, so each runs to the next 'error:' or the end)."""
    return [" ".join(("error:" + part).split()) for part in output.split("error:")[1:]]


@pytest.fixture(scope="module")
def served() -> Any:
    with serve_app(toy_server().app()) as url:
        yield url


@pytest.fixture(scope="module")
def toy_run(served: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    home = tmp_path_factory.mktemp("guard")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DECOEVO_CACHE", str(home / "cache.sqlite"))
        mp.chdir(home)
        data = write_toy_questions(home / "toy.jsonl")
        trained = runner.invoke(app, toy_run_args(f"{served}/v1", data, home / "runs", "mine", steps=2,
                                                  sets=(SPLITS,)))
        assert trained.exit_code == 0, trained.output
    return home / "runs" / "mine"


@pytest.fixture
def env(toy_run: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DECOEVO_CACHE", str(toy_run.parent.parent / "cache.sqlite"))
    monkeypatch.setenv("COLUMNS", "80")
    return toy_run


def test_fail_on_regression_and_fail_under_exit_1_naming_the_questions(env: Path, served: str) -> None:
    grader = ["--grader-base-url", f"{served}/v1", "--grader-model", "toy"]
    # the initial v000 against the shipped v001: v001 is better everywhere, so both checks pass
    ok = runner.invoke(app, ["compare", str(env), *grader, "--fail-on-regression", "--fail-under", "90"])
    assert ok.exit_code == 0, ok.output
    # the same comparison held to a bar it does not reach: exit 1, one line naming the questions under it
    high = runner.invoke(app, ["compare", str(env), *grader, "--fail-under", "100.5"])
    assert high.exit_code == 1, high.output
    errors = _error_lines(high.output)
    test_ids = json.loads((env / "splits.json").read_text())["test"]
    assert len(errors) == 1 and "--fail-under 100.5" in errors[0], high.output
    assert all(q in errors[0] for q in test_ids), errors
    # the table came first (the guard's verdict is the exit code, the comparison is still shown and written)
    assert "mean (4 paired)" in high.output


def test_a_changed_prompt_against_the_shipped_one(env: Path, served: str, tmp_path: Path) -> None:
    grader = ["--grader-base-url", f"{served}/v1", "--grader-model", "toy"]
    shipped = tmp_path / "prompt.md"
    exported = runner.invoke(app, ["export", str(env), "-o", str(shipped)])
    assert exported.exit_code == 0, exported.output
    same = runner.invoke(app, ["compare", str(env), "--skill", str(shipped), *grader, "--fail-on-regression"])
    assert same.exit_code == 0, same.output
    assert "holds the run's v001 unchanged" in _said(same.output)
    worse = tmp_path / "worse.md"
    worse.write_text(DEGRADED + "\n")
    broke = runner.invoke(app, ["compare", str(env), "--skill", str(worse), *grader, "--fail-on-regression"])
    assert broke.exit_code == 1, broke.output
    errors = _error_lines(broke.output)
    assert len(errors) == 1 and "4 question(s) scored lower" in _said(errors[0]), broke.output
    # self-graded: the command it suggests for an independent grader compares the same file
    assert f"decoevo compare {env} --skill {worse} --grader-model MODEL" in broke.output
    record = json.loads(next((env / "eval").glob("compare-test-v001-worse-*.json")).read_text())
    assert record["after_version"] is None and record["after_skill"]["path"] == str(worse)
    assert all(r["delta"] < 0 for r in record["rows"])


def test_guard_fails_closed_on_a_question_not_graded_under_both() -> None:
    rows = [{"question_id": "a", "before": {"score": 50.0}, "after": {"score": 60.0}, "delta": 10.0},
            {"question_id": "b", "before": {"score": 50.0}, "after": {"score": None}, "delta": None}]
    record = {"rows": rows, "after_score": 60.0, "n_paired": 1}
    verdict = check(record, fail_on_regression=True)
    assert not verdict.passed and "b" in verdict.line() and "not graded under both" in verdict.line()
    assert check(record).passed  # no check asked for: nothing to fail


def _guard_step() -> tuple[dict[str, str], str, list[str]]:
    """The recipe's job env, the "decoevo guard" step's script, and the names of the steps it skips."""
    workflow = yaml.safe_load(RECIPE.read_text(encoding="utf-8"))
    job = workflow["jobs"]["guard"]
    steps = job["steps"]
    guard = [s for s in steps if s.get("name") == "decoevo guard"]
    assert len(guard) == 1
    skipped = [s.get("name") or s.get("uses", "") for s in steps if s is not guard[0]]
    return {k: str(v) for k, v in job["env"].items()}, guard[0]["run"], skipped


def _run_step(script: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    bin_dir = str(Path(sys.executable).parent)  # this environment's `decoevo`
    full = {**os.environ, **env, "PATH": bin_dir + os.pathsep + os.environ.get("PATH", ""), "COLUMNS": "80"}
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=cwd, env=full, text=True,
                          capture_output=True, timeout=300)


def test_the_ci_recipe_passes_the_shipped_prompt_and_fails_a_seeded_regression(env: Path, served: str,
                                                                               tmp_path: Path) -> None:
    job_env, script, skipped = _guard_step()
    # what the test does not run: checkout, Python, the cache and the install (this environment is installed)
    assert skipped == ["actions/checkout@v4", "actions/setup-python@v5", "actions/cache@v4", "install decoevo"]
    repo = tmp_path / "repo"
    prompt = repo / job_env["DECOEVO_PROMPT"]
    prompt.parent.mkdir(parents=True)
    exported = runner.invoke(app, ["export", str(env), "-o", str(prompt)])
    assert exported.exit_code == 0, exported.output
    (repo / job_env["DECOEVO_RUN"]).parent.mkdir(parents=True)
    (repo / job_env["DECOEVO_RUN"]).symlink_to(env, target_is_directory=True)  # the run, as committed
    # the repository's variables and secrets: the toy world's grader
    values = {"vars.DECOEVO_GRADER_BASE_URL": f"{served}/v1", "vars.DECOEVO_GRADER_MODEL": "toy",
              "secrets.OPENAI_API_KEY": "unused"}

    def resolve(value: str) -> str:
        return re.sub(r"\$\{\{\s*([\w.]+)\s*\}\}", lambda m: values[m[1]], value)

    step_env = {k: resolve(v) for k, v in job_env.items()}
    step_env["DECOEVO_CACHE"] = str(env.parent.parent / "cache.sqlite")

    unchanged = _run_step(script, step_env, repo)
    assert unchanged.returncode == 0, unchanged.stdout + unchanged.stderr

    prompt.write_text(DEGRADED + "\n", encoding="utf-8")  # the seeded regression: a pull request's edit
    regressed = _run_step(script, step_env, repo)
    assert regressed.returncode == 1, regressed.stdout + regressed.stderr
    errors = _error_lines(regressed.stderr)
    assert len(errors) == 1, regressed.stderr
    test_ids = json.loads((env / "splits.json").read_text())["test"]
    said = _said(errors[0])
    assert "scored lower" in said and "--fail-under 60" in said and all(q in said for q in test_ids), said


def test_the_docs_page_holds_the_recipe_as_it_is() -> None:
    """An installed wheel has docs/*.md only: the page carries the workflow file whole."""
    page = (ROOT / "docs" / "evaluation-files.md").read_text(encoding="utf-8")
    assert f"```yaml\n{RECIPE.read_text(encoding='utf-8')}```" in page
