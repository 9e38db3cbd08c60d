"""The README's toy run, exactly as the README says it (the toy server as its own process, then the README's
commands on the bundled HealthBench sample), then every command its `next:` lines suggest: `decoevo compare`
on it used to exit 2 ("rows.5.before.score: Input should be greater than or equal to 0"): a HealthBench
conversation's own score can be negative. And what compare says about a folder that is not a run, the
`--split` its messages suggest, and the `next:` lines of a run that shipped its initial skill."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from decoevo.cli import app
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

runner = CliRunner()
README = Path(__file__).resolve().parents[1] / "README.md"
README_URL = "http://127.0.0.1:8000/v1"


def _said(output: str) -> str:
    return " ".join(output.split())


def readme_toy_block() -> tuple[str, list[str]]:
    """The README's toy-server line and the decoevo commands after it, as written."""
    text = README.read_text(encoding="utf-8")
    start = text.index("python -m decoevo.testing.toy_server")
    block = text[start:text.index("```", start)]
    lines = [line.split("  #")[0].strip() for line in block.splitlines()]
    return lines[0], [line for line in lines[1:] if line.startswith("decoevo ")]


@pytest.fixture
def toy_process(toy_env: Path) -> Iterator[str]:
    """`python -m decoevo.testing.toy_server` as the README starts it, on a free port: its base URL."""
    server_line, _ = readme_toy_block()
    args = shlex.split(server_line.rstrip("&").strip())
    assert args[:3] == ["python", "-m", "decoevo.testing.toy_server"] and args[3:] == ["--port", "8000"]
    proc = subprocess.Popen([sys.executable, "-m", "decoevo.testing.toy_server", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # printed once it listens
        url = re.search(r"(http://127\.0\.0\.1:\d+/v1)", first)
        assert url, first
        yield url[1]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def _invoke(command: str) -> Result:
    args = shlex.split(command)
    assert args[0] == "decoevo"
    return runner.invoke(app, args[1:])


def _next_commands(output: str) -> list[str]:
    after = output.split("next:")[1]
    return [line.strip() for line in after.splitlines() if line.strip().startswith("decoevo ")]


def test_the_readme_toy_run_then_compare_and_report_as_its_next_lines_say(toy_process: str, toy_env: Path) -> None:
    _, commands = readme_toy_block()
    assert commands == ["decoevo doctor --base-url http://127.0.0.1:8000/v1 --model toy",
                        "decoevo run --base-url http://127.0.0.1:8000/v1 --model toy --steps 2"]
    results = [_invoke(c.replace(README_URL, toy_process)) for c in commands]
    for command, result in zip(commands, results, strict=True):
        assert result.exit_code == 0, f"{command}\n{result.output}"
    trained = results[-1]
    run = toy_env / "runs" / "decoevo-healthbench_sample-s0"
    assert json.loads((run / "summary.json").read_text())["solver_version"] > 0  # it ships a rewritten skill
    suggested = _next_commands(trained.output)
    assert [c.split()[1] for c in suggested] == ["compare", "export", "report"], suggested
    outputs = {}
    for command in suggested:
        result = _invoke(command)
        assert result.exit_code == 0, f"{command}\n{result.output}"
        assert "error" not in result.output.lower(), f"{command}\n{result.output}"
        outputs[command.split()[1]] = result.output
    record = json.loads(next((run / "eval").glob("compare-test-*.json")).read_text())
    # compare says which rubric it scores and on which scale (the gold one, 0-100; an export --to says its
    # own: tests/test_export_user_suite.py), so a 100.0 beside a promptfoo 0.2 is not a contradiction
    assert "0-100 against each question's gold rubric" in " ".join(outputs["compare"].split())
    # the sample's negative-point criteria take a conversation's own score below 0; the means and the Δ
    # are over the same paired questions
    scores = [r["before"]["score"] for r in record["rows"]] + [r["after"]["score"] for r in record["rows"]]
    assert min(scores) < 0, scores
    paired = [r for r in record["rows"] if r["delta"] is not None]
    assert record["before_score"] == pytest.approx(sum(r["before"]["score"] for r in paired) / len(paired))
    assert record["mean_delta"] == pytest.approx(record["after_score"] - record["before_score"])
    # the report reads the comparison (no warning about it) and leads with it
    assert "compare-test" not in outputs["report"], outputs["report"]
    report = (toy_env / "report.html").read_text(encoding="utf-8")
    assert f"Δ {record['mean_delta']:+.1f}" in report


def test_compare_on_a_folder_that_is_not_a_run_says_so(toy_env: Path) -> None:
    folder = toy_env / "notes"
    folder.mkdir()
    for target in (folder, toy_env / "missing"):
        result = runner.invoke(app, ["compare", str(target)])
        assert result.exit_code == 2, result.output
        said = _said(result.output)
        assert "not a decoevo run directory" in said or "no such folder" in said, said
        assert "unfinished" not in said and "resume" not in said, said


@pytest.fixture
def served() -> Iterator[str]:
    with serve_app(toy_server().app()) as url:
        yield url


def test_the_split_compare_suggests_is_an_option_it_has(toy_env: Path, served: str) -> None:
    data = write_toy_questions(toy_env / "toy.jsonl")
    sets = ("splits={train: 4, probe: 2, solver_gate: 3, generator_gate: 3, test: 0, diagnostic: 2}",)
    trained = runner.invoke(app, toy_run_args(f"{served}/v1", data, toy_env / "runs", "mine", steps=1, sets=sets))
    assert trained.exit_code == 0, trained.output
    run = toy_env / "runs" / "mine"
    empty = runner.invoke(app, ["compare", str(run)])
    assert empty.exit_code == 2 and "--split" in empty.output, empty.output
    # the option it names exists and compares on the split it names
    on_diagnostic = runner.invoke(app, ["compare", str(run), "--split", "diagnostic"])
    assert on_diagnostic.exit_code == 0, on_diagnostic.output
    assert list((run / "eval").glob("compare-diagnostic-*.json"))


# its report's cost figure has no role with a token (every call a cache hit): once a matplotlib warning
@pytest.mark.filterwarnings("error::UserWarning")
def test_a_run_that_ships_its_initial_skill_offers_no_comparison_with_itself(toy_env: Path, served: str) -> None:
    data = write_toy_questions(toy_env / "toy.jsonl")
    sets = ("splits={train: 4, probe: 2, solver_gate: 3, generator_gate: 3, test: 3}",)
    trained = runner.invoke(app, [*toy_run_args(f"{served}/v1", data, toy_env / "runs", "same", steps=1,
                                                sets=sets), "--method", "zero_shot"])
    assert trained.exit_code == 0, trained.output
    run = toy_env / "runs" / "same"
    assert json.loads((run / "summary.json").read_text())["solver_version"] == 0
    suggested = _next_commands(trained.output)
    assert not any(c.split()[1] == "compare" for c in suggested), suggested
    assert suggested[0] == f"decoevo eval {run}"
    for command in suggested:
        result = _invoke(command)
        assert result.exit_code == 0, f"{command}\n{result.output}"
