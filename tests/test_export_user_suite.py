"""Issue 44.4: an export keeps the user's own promptfoo suite. A config of mixed assertions (their llm-rubric
texts, contains, icontains, not-contains, inline javascript reading their own variable, a defaultTest assertion)
is imported, run on the toy world and exported (from the run, and with `--data` the config itself); `promptfoo
eval` on the export runs every one of the user's assertions as they wrote it, the co-evolved rubric beside them
(marked `metadata.source: decoevo`)."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server

from .interop_helpers import HAS_PROMPTFOO, PROMPTFOO, tool_env

CONFIG = """\
prompts:
  - "You are a friendly sports-medicine assistant.\\n\\n{{query}}"
providers:
  - openai:gpt-4o-mini
defaultTest:
  vars:
    audience: runners
  assert:
    - type: javascript
      value: "output.length > 0 && context.vars.audience === 'runners'"
tests:
"""
TEST = """\
  - description: knee case {i}
    vars:
      query: My knee hurts after running, case {i}. What should I do?
      tone: calm
    assert:
      - type: llm-rubric
        value: Tells the user when to see a doctor (case {i})
        weight: 2
      - type: icontains
        value: knee
      - type: not-contains
        value: surgery is the only option
      - type: javascript
        value: "context.vars.query.includes('case {i}') && context.vars.tone === 'calm'"
"""
USER_TYPES = Counter({"llm-rubric": 1, "icontains": 1, "not-contains": 1, "javascript": 2})  # per test (+defaultTest)


@pytest.fixture(scope="module")
def user_run(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("suite")
    config = tmp / "promptfooconfig.yaml"
    config.write_text(CONFIG + "".join(TEST.format(i=i) for i in range(16)))
    with pytest.MonkeyPatch.context() as env, serve_app(toy_server().app()) as url:
        env.setenv("DECOEVO_CACHE", str(tmp / "cache.sqlite"))
        args = toy_run_args(f"{url}/v1", config, tmp / "runs", "toy", steps=1,
                            sets=("splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",))
        result = CliRunner().invoke(app, [*args, "--format", "promptfoo"])
        assert result.exit_code == 0, result.output
        yield tmp, tmp / "runs" / "toy", config


def user_asserts(test: dict) -> list[dict]:
    return [a for a in test["assert"] if (a.get("metadata") or {}).get("source") != "decoevo"]


@pytest.mark.parametrize("with_data", [False, True])
def test_the_export_keeps_the_users_assertions_beside_the_rubric(user_run, with_data: bool) -> None:
    tmp, run, config = user_run
    out = tmp / f"pf-{with_data}"
    args = ["export", str(run), "--to", "promptfoo", str(out)]
    if with_data:
        args += ["--data", str(config), "--format", "promptfoo"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # which rubric its tests score, on which scale, beside compare's
    assert "co-evolved generator's rubric, 0-1 per test" in said and "gold rubric, 0-100" in said
    if with_data:  # what the config gave and what it did not, as `run` says it
        assert "llm-rubric" in result.output and "javascript" in result.output
    written = yaml.safe_load((out / "promptfooconfig.yaml").read_text())
    assert written["defaultTest"]["vars"] == {"audience": "runners"}
    assert [a["type"] for a in written["defaultTest"]["assert"]] == ["javascript"]
    tests = yaml.safe_load((out / "tests.yaml").read_text())
    assert len(tests) == (16 if with_data else 2)
    for test in tests:
        case = test["description"].split()[-1]
        assert test["vars"]["query"].endswith(f"case {case}. What should I do?") and test["vars"]["tone"] == "calm"
        assert [a["type"] for a in user_asserts(test)] == ["llm-rubric", "icontains", "not-contains", "javascript"]
        assert user_asserts(test)[0] == {"type": "llm-rubric", "value": f"Tells the user when to see a doctor "
                                         f"(case {case})", "weight": 2}
        assert [a for a in test["assert"] if a not in user_asserts(test)]  # the co-evolved rubric, beside them
        assert "question_var" not in test  # decoevo's own note of the question's variable is not a promptfoo field


@pytest.mark.skipif(not HAS_PROMPTFOO, reason="promptfoo is not installed (scripts/install.sh --dev with node)")
def test_promptfoo_runs_the_users_own_assertions_on_the_export(user_run) -> None:
    tmp, run, _ = user_run
    out = tmp / "pf-run"
    assert CliRunner().invoke(app, ["export", str(run), "--to", "promptfoo", str(out)]).exit_code == 0
    proc = subprocess.run([str(PROMPTFOO), "eval", "-o", str(tmp / "out.json"), "--no-cache", "--no-table"],
                          cwd=out, env=tool_env(tmp), capture_output=True, text=True, timeout=300)
    assert (tmp / "out.json").exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads((tmp / "out.json").read_text())["results"]["results"]
    assert len(rows) == 4
    for row in rows:
        parts = row["gradingResult"]["componentResults"]
        ran = Counter(p["assertion"]["type"] for p in parts
                      if ((p["assertion"].get("metadata") or {}).get("source")) != "decoevo")
        assert ran == USER_TYPES, ran  # every one of the user's, the defaultTest's javascript included
        theirs = [p for p in parts if p["assertion"]["type"] in ("icontains", "javascript")]
        assert all(p["pass"] for p in theirs if p["assertion"]["type"] == "javascript"), theirs  # their vars there
        assert any((p["assertion"].get("metadata") or {}).get("source") == "decoevo" for p in parts)
