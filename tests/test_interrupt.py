"""Ctrl-C during a command that calls the model ends in one line that says what was kept and what to do,
with exit code 130, never a traceback or silence. `decoevo eval` is interrupted for real: a subprocess
grading against a slow server on 127.0.0.1 gets SIGINT while its requests are in flight."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.cli.boundary import run_guarded
from decoevo.testing.server import free_port, serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

from .result_files import has_result


def _as_started_from_a_shell() -> None:
    """The child gets Ctrl-C as from a terminal. A shell starts a background job (`cmd &` without job
    control) with SIGINT ignored, the disposition passes through exec, and Python keeps an inherited
    SIG_IGN: a suite launched that way once handed it to this child, which never saw the signal."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_during_eval_says_what_to_do_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache.sqlite"
    monkeypatch.setenv("DECOEVO_CACHE", str(cache))
    data = write_toy_questions(tmp_path / "toy.jsonl")
    port = free_port()
    splits = "splits={train: 5, probe: 2, solver_gate: 3, generator_gate: 3, test: 3}"
    with serve_app(toy_server().app(), port=port) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=1, sets=(splits,))
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
    run_dir = tmp_path / "runs" / "r"
    slow = toy_server(delay_s=30.0)  # the same address now answers slowly: eval is mid-flight when interrupted
    with serve_app(slow.app(), port=port):
        env = {**os.environ, "DECOEVO_CACHE": str(cache), "COLUMNS": "200"}
        proc = subprocess.Popen([sys.executable, "-m", "decoevo", "eval", str(run_dir)], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=_as_started_from_a_shell)
        deadline = time.monotonic() + 60
        while slow.max_in_flight == 0 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.1)
        assert slow.max_in_flight > 0, "eval never reached the server"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, (out, err)
    text = " ".join((out + err).split())
    assert "Traceback" not in text
    assert "interrupted (Ctrl-C) while grading" in text and str(run_dir) in text
    assert "answers already paid for come from the cache" in text
    assert not has_result(run_dir)  # nothing half-written under the result's name


def test_any_command_interrupted_ends_in_one_line_with_code_130(capsys: pytest.CaptureFixture[str]) -> None:
    def body() -> None:
        raise KeyboardInterrupt

    def fail(message: str, code: int) -> None:
        print(message)
        raise typer.Exit(code)

    with pytest.raises(typer.Exit) as exited:
        run_guarded(body, fail)  # type: ignore[arg-type]
    assert exited.value.exit_code == 130
    assert "interrupted (Ctrl-C); run the same command again" in capsys.readouterr().out
