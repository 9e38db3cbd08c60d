"""A run that fails before its first step (a missing model file, a server that cannot be reached) leaves no
directory behind, so the same command works once the cause is fixed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.testing.server import free_port, serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

runner = CliRunner()


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_missing_embedded_model_leaves_nothing_and_the_rerun_is_not_blocked(here: Path) -> None:
    for _ in range(2):
        result = runner.invoke(app, ["run", "--model", "/nonexistent.gguf", "--name", "x"])
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert "/nonexistent.gguf does not exist" in said and "already holds" not in said
        assert not (here / "runs" / "x").exists()


def test_unreachable_server_leaves_nothing_and_the_same_command_then_runs(here: Path) -> None:
    data = write_toy_questions(here / "toy.jsonl")
    port = free_port()  # nothing listens there yet
    args = toy_run_args(f"http://127.0.0.1:{port}/v1", data, here / "runs", "r", steps=1,
                        sets=("lm.models.default.max_retries=0",))
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())  # the console wraps long lines
    assert "Nothing was saved" in said and "resume" not in said
    assert not (here / "runs" / "r").exists()
    with serve_app(toy_server().app(), port=port):
        result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (here / "runs" / "r" / "final_solver_skill.md").is_file()
