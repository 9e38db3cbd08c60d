"""A served model that finishes (issue 45, part 3): a run against a one-slot server fits its concurrency to the
server's slots before it starts (llama.cpp's `/props` or `/slots`), and a run that meets a busy server anyway
(requests timing out while others queue, the server still generating the ones given up on) lowers its
concurrency and sends them again instead of failing. `decoevo doctor` says what it found, and SIGTERM ends a run
as Ctrl-C does. The server is `testing.one_slot.OneSlotServer`: the toy world, one reply generated at a time."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.lm.ratelimit import AdaptiveLimiter
from decoevo.testing.fake_openai import FakeOpenAI
from decoevo.testing.one_slot import OneSlotServer
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_reply, write_toy_questions


def quick_run_args(base_url: str, data: Path, *sets: str) -> list[str]:
    """`decoevo run --preset quick` on the toy questions, as a user's own task would be run."""
    args = ["run", "--base-url", base_url, "--model", "toy", "--data", str(data), "--task", "healthbench",
            "--preset", "quick", "--runs-root", "runs", "--name", "r", "--seeds", "0",
            "--set", "lm.models.default.backoff_base_s=0.01"]
    for item in sets:
        args += ["--set", item]
    return args


def finished(run: Path) -> dict:
    summary = json.loads((run / "summary.json").read_text())
    assert summary["steps_done"] == 2, summary
    return summary


@pytest.mark.parametrize("expose", ["props", "slots"])
def test_the_run_reads_the_servers_slots_and_sends_one_request_at_a_time(toy_env: Path, expose: str) -> None:
    data = write_toy_questions(toy_env / "toy.jsonl", 14)
    server = OneSlotServer(service_s=0.01, expose=expose)  # type: ignore[arg-type]
    with serve_app(server.app()) as url:
        result = CliRunner().invoke(app, quick_run_args(f"{url}/v1", data))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"generates 1 request(s) at once (llama.cpp's /{expose}); sending at most 1 at a time" in text
    assert server.most_received == 1  # before: the run's requests queued at the server, several at once
    finished(toy_env / "runs" / "r")
    recorded = yaml.safe_load((toy_env / "runs" / "r" / "config.yaml").read_text())
    assert recorded["lm"]["models"]["default"]["max_concurrency"] == 1  # a resume keeps it


def test_a_quick_run_at_a_busy_one_slot_server_lowers_its_concurrency_and_finishes(toy_env: Path) -> None:
    """The server states no slots (as llama-cpp-python's did not, before its /openapi.json was read), so the run
    starts at its default concurrency. One long generation makes every queued request pass its first-byte limit
    at once; the server goes on generating all of them. Before, each retry queued behind that backlog and timed
    out again, and the run failed after timeout_retries; now the timeouts at a busy server are sent again at a
    lower concurrency and not counted."""
    data = write_toy_questions(toy_env / "toy.jsonl", 14)
    server = OneSlotServer(service_s=0.3, stalls={8}, stall_s=1.5, expose="none")
    with serve_app(server.app()) as url:
        result = CliRunner().invoke(app, quick_run_args(f"{url}/v1", data,
                                                        "lm.models.default.first_byte_timeout_s=1.0"))
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "timed out" not in text
    assert "while the server was busy; now at most" in text  # the concurrency was lowered, and said so
    assert server.most_received > 1  # it was busy: requests queued there
    finished(toy_env / "runs" / "r")


def test_a_busy_timeout_halves_the_requests_actually_in_flight() -> None:
    limiter = AdaptiveLimiter(64)
    limiter.in_flight = 6  # six sent, far below the limit of 64
    assert limiter.busy(2.0)
    limiter.release(throttled=True, busy=True, admitted_at=1.0)
    assert limiter.concurrency == 3  # before: 32, which sends as many as before
    assert limiter.lowest == 3


@pytest.mark.parametrize("expose", ["props", "slots"])
def test_doctor_says_the_slots_and_the_structured_speed(toy_env: Path, expose: str) -> None:
    server = OneSlotServer(service_s=0.01, structured_s=0.8, expose=expose)  # type: ignore[arg-type]
    with serve_app(server.app()) as url:
        result = CliRunner().invoke(app, ["doctor", "--base-url", f"{url}/v1", "--model", "toy"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert f"slots: 1 (llama.cpp's /{expose})" in text
    assert "a run sends at most 1 request(s) at a time there" in text
    assert "structured output: slow here" in text
    assert "--set lm.models.default.structured_output=none" in text


def test_doctor_measures_the_slots_of_a_server_that_states_none(toy_env: Path) -> None:
    server = OneSlotServer(service_s=0.3, expose="none")
    with serve_app(server.app()) as url:
        result = CliRunner().invoke(app, ["doctor", "--base-url", f"{url}/v1", "--model", "toy"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "slots: 1 (measured)" in text
    assert "structured output: fine here" in text


def test_a_run_at_a_slow_structured_server_sizes_its_timeouts_and_says_how_to_go_faster(toy_env: Path) -> None:
    data = write_toy_questions(toy_env / "toy.jsonl", 14)
    server = OneSlotServer(service_s=0.01, structured_s=0.8, expose="props")
    with serve_app(server.app()) as url:
        result = CliRunner().invoke(app, quick_run_args(f"{url}/v1", data, "hyper.steps=1"))
    text = " ".join(result.output.split())
    assert "schema-constrained replies are slow" in text and "timeouts sized to" in text, text
    assert "--set lm.models.default.structured_output=none" in text
    recorded = yaml.safe_load((toy_env / "runs" / "r" / "config.yaml").read_text())
    assert recorded["lm"]["models"]["default"]["min_tokens_per_s"] < 25.0  # sized to the measured speed


def _slow_after(first: int) -> FakeOpenAI:
    """The toy world answering its first `first` requests at once and the rest after 60 s."""
    return FakeOpenAI(lambda body, n: toy_reply(body, n, 0.0 if n < first else 60.0), models=("toy",))


def test_sigterm_ends_a_run_with_where_it_stopped_and_how_to_resume(tmp_path: Path) -> None:
    data = write_toy_questions(tmp_path / "toy.jsonl", 14)
    server = _slow_after(6)
    with serve_app(server.app(), grace_s=0) as url:
        env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite"), "COLUMNS": "200"}
        proc = subprocess.Popen([sys.executable, "-m", "decoevo", *quick_run_args(f"{url}/v1", data)],
                                cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while len(server.requests) <= 6 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)  # until a request the server holds is in flight: the run is mid-step
        assert len(server.requests) > 6, "the run never reached the slow requests"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    text = " ".join((out + err).split())
    assert proc.returncode == 143, text
    assert "Traceback" not in text
    assert "stopped by SIGTERM in step 1; continue with `decoevo resume runs/r`" \
        in text, text
    assert (tmp_path / "runs" / "r" / "calls.jsonl").is_file()  # the answered calls are kept for the resume


def test_a_paid_provider_is_never_probed() -> None:
    from decoevo.lm import ModelSpec
    from decoevo.lm.capacity import free_to_probe

    assert free_to_probe(ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:8000/v1"))
    assert not free_to_probe(ModelSpec(backend="openai", model="m", base_url="https://api.openai.com/v1"))
    assert not free_to_probe(ModelSpec(backend="openai", model="m", base_url="http://10.0.0.5:8000/v1",
                                       input_price_per_mtok=1.0, output_price_per_mtok=2.0))
    assert not free_to_probe(ModelSpec())  # the embedded model has no server
