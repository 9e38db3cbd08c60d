"""Issue 44.4: the exported grader asks the judge endpoint the way decoevo learned it must. A server that answers
`json_schema` with a 500 (as llama-cpp-python's does) and takes `json_object` + schema: the run negotiates that,
and the exported promptfoo config's grader sends it, so `promptfoo eval` grades every criterion there."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, write_toy_questions

from .interop_helpers import HAS_PROMPTFOO, PROMPTFOO, tool_env


def like_llama_cpp(body: dict[str, Any], n: int) -> Reply:
    if (body.get("response_format") or {}).get("type") == "json_schema":
        return Reply(status=500, error_message="'json_schema' response_format is not supported")
    return toy_reply(body, n)


@pytest.mark.skipif(not HAS_PROMPTFOO, reason="promptfoo is not installed (scripts/install.sh --dev with node)")
def test_the_grader_sends_what_the_endpoint_takes(tmp_path, monkeypatch) -> None:
    server = FakeOpenAI(like_llama_cpp, models=("toy",))
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    with serve_app(server.app()) as url:
        data = write_toy_questions(tmp_path / "q.jsonl")
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "toy", steps=1,
                            sets=("splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",))
        assert CliRunner().invoke(app, args).exit_code == 0
        result = CliRunner().invoke(app, ["export", str(tmp_path / "runs" / "toy"), "--to", "promptfoo",
                                          str(tmp_path / "pf")])
        assert result.exit_code == 0, result.output
        config = yaml.safe_load((tmp_path / "pf" / "promptfooconfig.yaml").read_text())
        body = config["defaultTest"]["options"]["provider"]["config"]["body"]
        assert body["response_format"]["type"] == "json_object" and "schema" in body["response_format"]
        before = len(server.requests)
        proc = subprocess.run([str(PROMPTFOO), "eval", "-o", str(tmp_path / "out.json"), "--no-cache", "--no-table"],
                              cwd=tmp_path / "pf", env=tool_env(tmp_path), capture_output=True, text=True,
                              timeout=300)
        assert (tmp_path / "out.json").exists(), proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = json.loads((tmp_path / "out.json").read_text())["results"]["results"]
    graded = [c for r in rows for c in r["gradingResult"]["componentResults"]]
    assert graded and all(isinstance(c["score"], int | float) and "500" not in str(c.get("reason")) for c in graded)
    sent = [r.get("response_format", {}).get("type") for r in server.requests[before:] if "response_format" in r]
    assert sent and set(sent) == {"json_object"}  # not one grading call refused
