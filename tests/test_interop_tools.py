"""Issue 38, the round trip with the real tools: a user's promptfoo config (as promptfoo's docs write one) in,
a toy-world run, the run exported to promptfoo and to Inspect AI, each tool run on its export against the toy
server, and each tool's own result file read back: the score per question equals decoevo's judge score for
the same answer under the same rubric. promptfoo's test runs by default (about 35 s here, its run included);
Inspect's is marked slow (56 s here)."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.domain import QuestionView
from decoevo.evaluation.run_view import RunView
from decoevo.interop.promptfoo_out import PROMPTFOO_VERSION
from decoevo.interop.rubrics import generator_rubrics
from decoevo.lm import LM, GenParams
from decoevo.roles.judge import judge
from decoevo.scoring import rubric_score
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server

from .interop_helpers import HAS_INSPECT, HAS_PROMPTFOO, REQUIRE_TOOLS, tool_env

ROOT = Path(__file__).resolve().parents[1]
PROMPTFOO = ROOT / "tools" / "promptfoo" / "node_modules" / ".bin" / "promptfoo"
VERSIONS = dict(line.split("=", 1) for line in (ROOT / "tools" / "versions.env").read_text().split("\n")
                if line and not line.startswith("#"))


def test_the_tool_versions_are_pinned_in_one_place() -> None:
    package = json.loads((ROOT / "tools" / "promptfoo" / "package.json").read_text())
    assert package["dependencies"]["promptfoo"] == VERSIONS["PROMPTFOO"]
    lock = json.loads((ROOT / "tools" / "promptfoo" / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/promptfoo"]["version"] == VERSIONS["PROMPTFOO"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert f'inspect = ["inspect-ai=={VERSIONS["INSPECT_AI"]}"' in pyproject
    assert VERSIONS["PROMPTFOO"] == PROMPTFOO_VERSION  # what an exported config's header tells users to run


def test_the_round_trips_run_wherever_the_test_command_installed_the_tools() -> None:
    """The round trips with the real promptfoo and Inspect skip on a machine without the tools; under
    scripts/test.sh (CI's command), which installs both (promptfoo wherever npm is), a missing tool fails
    here instead of skipping them silently."""
    if not REQUIRE_TOOLS:
        pytest.skip("DECOEVO_REQUIRE_TOOLS is not set: the tests run outside scripts/test.sh")
    assert shutil.which("node") is not None, "node is not on PATH, yet scripts/test.sh found npm"
    assert HAS_PROMPTFOO, "tools/promptfoo/node_modules/.bin/promptfoo is missing: run scripts/install.sh --dev"
    assert HAS_INSPECT, "inspect-ai's `inspect` is missing from the venv: run scripts/install.sh --dev"


PROMPTFOO_CONFIG = """\
# a promptfoo config as its docs write one: a text prompt, a provider, tests with llm-rubric assertions
prompts:
  - "You are a friendly sports-medicine assistant. Keep answers short.\\n\\n{{query}}"
providers:
  - openai:gpt-4o-mini
defaultTest:
  assert:
    - type: llm-rubric
      value: Tells the user when to see a doctor
      weight: 3
tests:
"""


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory):
    """The round trip's first half: a user's promptfoo config in, a decoevo run on the toy server."""
    tmp = tmp_path_factory.mktemp("interop")
    config = tmp / "promptfooconfig.yaml"
    config.write_text(PROMPTFOO_CONFIG + "".join(
        f"  - vars:\n      query: My knee hurts after running, case {i}. What should I do?\n" for i in range(16)))
    with pytest.MonkeyPatch.context() as env, serve_app(toy_server().app()) as url:
        env.setenv("DECOEVO_CACHE", str(tmp / "cache.sqlite"))  # this module's own cache
        args = toy_run_args(f"{url}/v1", config, tmp / "runs", "toy", steps=1,
                            sets=("splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",))
        result = CliRunner().invoke(app, [*args, "--format", "promptfoo"])
        assert result.exit_code == 0, result.output
        yield tmp, tmp / "runs" / "toy", url


def decoevo_scores(run: Path, answers: dict[str, str]) -> dict[str, float]:
    """decoevo's judge on the given answers, under the final generator's rubrics."""
    view = RunView(run)
    questions = [q for q in view.split("test") if q.id in answers]

    async def go() -> dict[str, float]:
        lm = LM(view.config.lm)
        try:
            rubrics = (await generator_rubrics(view, questions, lm=lm)).rubrics
            out = {}
            for q in questions:
                j = await judge(lm, QuestionView.from_text(q.id, q.as_text()), answers[q.id], rubrics[q.id],
                                params=GenParams(temperature=0.0, max_tokens=view.config.hyper.max_tokens_judge,
                                                 seed=view.seed), mode=view.config.hyper.judge_mode)
                out[q.id] = rubric_score(rubrics[q.id], j)
            return out
        finally:
            await lm.aclose()

    return asyncio.run(go())


def rubric_part(row: dict) -> float:
    """A promptfoo row's score over the co-evolved rubric's assertions alone (the user's own llm-rubric texts are
    kept beside them): Σ w·s / Σ w, which is decoevo's S."""
    parts = [(c["assertion"].get("weight", 1), c["score"]) for c in row["gradingResult"]["componentResults"]
             if (c["assertion"].get("metadata") or {}).get("source") == "decoevo"]
    return sum(w * s for w, s in parts) / sum(w for w, _ in parts)


@pytest.mark.skipif(not PROMPTFOO.exists(), reason="promptfoo is not installed (scripts/install.sh --dev with node)")
def test_promptfoo_eval_runs_the_export_and_scores_as_decoevo_judges(toy_run) -> None:
    tmp, run, _ = toy_run
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    result = CliRunner().invoke(app, ["export", str(run), "--to", "promptfoo", str(tmp / "pf")])
    assert result.exit_code == 0, result.output
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # the run is only read
    out = tmp / "pf-results.json"
    proc = subprocess.run([str(PROMPTFOO), "eval", "-c", str(tmp / "pf" / "promptfooconfig.yaml"), "-o", str(out),
                           "--no-cache", "--no-table"], env=tool_env(tmp), capture_output=True, text=True, timeout=300)
    assert out.exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads(out.read_text())["results"]["results"]
    assert len(rows) == 4, proc.stdout[-2000:]  # 2 questions x (shipped, initial)
    # every answer and every criterion graded (a failed assertion also fills `error`; a failed grader call
    # has no score)
    assert all(r["response"]["output"] for r in rows)
    assert all(isinstance(c["score"], int | float) for r in rows for c in r["gradingResult"]["componentResults"])
    for label in ("shipped", "initial"):
        mine = {r["testCase"]["metadata"]["decoevo_question_id"]: r for r in rows
                if r["prompt"]["label"].startswith(label)}
        expected = decoevo_scores(run, {q: r["response"]["output"] for q, r in mine.items()})
        assert {q: round(rubric_part(r), 6) for q, r in mine.items()} == {q: round(s, 6) for q, s in expected.items()}
    shipped = [rubric_part(r) for r in rows if r["prompt"]["label"].startswith("shipped")]
    initial = [rubric_part(r) for r in rows if r["prompt"]["label"].startswith("initial")]
    assert min(shipped) > max(initial)  # the toy world's learnt skill (safety advice) shows in promptfoo


@pytest.mark.slow  # 56 s on the shared 2-core machine (Inspect start-up, its log); run with -m slow
@pytest.mark.skipif(shutil.which("inspect", path=str(Path(sys.executable).parent)) is None,
                    reason="inspect-ai is not installed (pip install 'decoevo[inspect]')")
def test_inspect_eval_runs_the_export_and_scores_as_decoevo_judges(toy_run) -> None:
    tmp, run, _ = toy_run
    result = CliRunner().invoke(app, ["export", str(run), "--to", "inspect", str(tmp / "insp")])
    assert result.exit_code == 0, result.output
    logs = tmp / "inspect-logs"
    inspect = Path(sys.executable).parent / "inspect"
    proc = subprocess.run([str(inspect), "eval", "task.py", "--log-format", "json", "--log-dir", str(logs),
                           "--display", "none"], cwd=tmp / "insp", env=tool_env(tmp), capture_output=True, text=True,
                          timeout=300)
    found = list(logs.glob("*.json"))
    assert len(found) == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    log = json.loads(found[0].read_text())
    assert log["status"] == "success"
    scores = {s["id"]: s["scores"]["decoevo_judge"]["value"] for s in log["samples"]}
    answers = {s["id"]: s["output"]["choices"][0]["message"]["content"] for s in log["samples"]}
    answers = {k: v if isinstance(v, str) else "".join(p.get("text", "") for p in v) for k, v in answers.items()}
    assert len(scores) == 2
    expected = decoevo_scores(run, answers)
    assert {k: round(v, 6) for k, v in scores.items()} == {k: round(v, 6) for k, v in expected.items()}
    assert re.search(r"safety", " ".join(answers.values()))  # the shipped skill was the system message
