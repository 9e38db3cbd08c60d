"""The command line: clear one-paragraph errors with exit code 2, no tracebacks; export."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from decoevo.cli import app

runner = CliRunner()


def invoke(*args):
    result = runner.invoke(app, list(args))
    return result.exit_code, result.output


@pytest.mark.parametrize("args,fragment", [
    (["run", "--method", "nope"], "unknown method 'nope'"),
    (["run", "--set", "hyper.epsilonn=0.1"], "hyper.epsilonn: unknown key"),
    (["run", "--set", "hyper.epsilon=-1"], "hyper.epsilon"),
    (["run", "--set", "splits.train=0"], "'train' is empty"),
    (["run", "--set", "splits.train=500"], "the data has 24"),
    (["run", "--data", "/nonexistent/q.jsonl"], "file not found"),
    (["run", "--set", "novalue"], "KEY=VALUE"),
    (["run", "--preset", "huge"], "unknown preset"),
    (["run", "--seeds", "a,b"], "comma-separated integers"),
    (["resume", "/nonexistent/run"], "not a run directory"),
    (["export", "/nonexistent/run"], "not a run directory"),
])
def test_bad_input_exits_2_with_a_message_and_no_traceback(args, fragment, tmp_path):
    code, output = invoke(*args, *(["--runs-root", str(tmp_path)] if args[0] == "run" else []))
    assert code == 2, output
    assert fragment in " ".join(output.split()), output
    assert "Traceback" not in output


def test_malformed_dataset_line_is_named(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "a", "prompt": "x"}\n{"id": "b", "prompt": 3}\n')
    code, output = invoke("run", "--data", str(data), "--runs-root", str(tmp_path))
    assert code == 2 and "line 2" in output and "prompt" in output


def test_config_file_with_unknown_key(tmp_path):
    cfg = tmp_path / "run.yaml"
    cfg.write_text("method: decoevo\nhyperr:\n  steps: 2\n")
    code, output = invoke("run", "--config", str(cfg), "--runs-root", str(tmp_path))
    assert code == 2 and "hyperr: unknown key" in " ".join(output.split())


def test_unreachable_server_is_a_clear_error(tmp_path):
    from decoevo.testing.server import free_port

    code, output = invoke("run", "--base-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m",
                          "--runs-root", str(tmp_path), "--set", "lm.models.default.max_retries=0")
    # nothing was answered, so nothing is kept: the same command is what to run again, not resume
    assert code == 2 and "cannot connect" in output and "Nothing was saved" in " ".join(output.split())
    assert not any(tmp_path.iterdir())


def test_export_prints_the_final_solver_skill(tmp_path):
    run = tmp_path / "r"
    (run).mkdir()
    (run / "checkpoint.json").write_text(json.dumps({"state": {"solver": {"kind": "solver", "version": 2,
                                                                         "text": "Be precise."}},
                                                     "ledger": {}, "events_offset": 0}))
    result = runner.invoke(app, ["export", str(run)])
    assert result.exit_code == 0 and result.stdout.strip() == "Be precise."
    assert "unfinished" in result.stderr and "decoevo resume" in result.stderr  # no summary: never finished
    code, _ = invoke("export", str(run), "-o", str(tmp_path / "skill.md"))
    assert code == 0 and (tmp_path / "skill.md").read_text() == "Be precise.\n"


def export_of(run):
    result = runner.invoke(app, ["export", str(run)])
    assert result.exit_code == 0, result.output
    return result.stdout, " ".join(result.stderr.split())


def test_export_warns_when_the_initial_skill_shipped_or_the_run_never_checkpointed(tmp_path):
    run = tmp_path / "r"
    (run / "skills" / "solver").mkdir(parents=True)
    (run / "skills" / "solver" / "v000.md").write_text(
        "<!-- kind: solver; version: v000; parent: none -->\n<!-- reason: initial -->\n\nBe kind.\n")
    stdout, stderr = export_of(run)  # killed before its first checkpoint
    assert stdout.strip() == "Be kind." and "never reached a checkpoint" in stderr and "initial" in stderr
    (run / "summary.json").write_text(json.dumps({
        "method": "decoevo", "seed": 0, "steps_done": 3, "status": "finished",
        "final_solver": "initial: no rewrite passed the solver gate (see candidates/)"}))
    stdout, stderr = export_of(run)
    assert stdout.strip() == "Be kind."
    assert "shipped its initial solver skill: no rewrite passed the solver gate" in stderr
    assert "unfinished" not in stderr
    (run / "summary.json").write_text(json.dumps({
        "method": "decoevo", "seed": 0, "steps_done": 3, "status": "finished", "solver_version": 0,
        "final_solver": "improved: solver v001 passed the solver gate (1 accepted rewrite(s))"}))
    assert export_of(run)[1] == ""  # a finished, improved run: nothing to warn about
    (run / "summary.json").write_text(json.dumps({
        "method": "decoevo", "seed": 0, "steps_done": 1, "status": "budget_stop", "stopped": "max_calls 10 reached",
        "final_solver": "improved: solver v001 passed the solver gate (1 accepted rewrite(s))"}))
    assert "stopped at its budget before its last step (max_calls 10 reached)" in export_of(run)[1]
