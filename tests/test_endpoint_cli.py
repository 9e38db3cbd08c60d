"""The first contact with a user's server, through the command line (issue 27, items 1-3, 7, 9): the
preset a served run takes, a model the server does not serve, `provider/model`, --limit/--concurrency,
--version, a connection that never came up, and the toy server started on its own (aiohttp)."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.testing.server import free_port
from decoevo.testing.toy_server import write_toy_questions

runner = CliRunner()


def invoke(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, list(args))
    return result.exit_code, " ".join(result.output.split())


@contextmanager
def toy_process() -> Iterator[str]:
    """`python -m decoevo.testing.toy_server` as a user starts it (a process of its own, aiohttp)."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "decoevo.testing.toy_server", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    said = proc.stdout.read() if proc.stdout else ""
                    raise RuntimeError(f"toy server did not start: {said}") from None
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    with toy_process() as url:
        yield url


def _small(root: Path, name: str, data: Path) -> list[str]:
    return ["--data", str(data), "--task", "healthbench", "--runs-root", str(root), "--name", name,
            "--set", "splits={train: 4, probe: 1, solver_gate: 2, generator_gate: 1, test: 0}",
            "--set", "hyper={steps: 1, batch_size: 2, audit_every: 1, rollouts: 2}"]


def test_a_served_run_takes_the_default_preset_and_says_so(served, tmp_path):
    """Item 1: without --preset a server run is sized for a capable model (not quick's 120 tokens)."""
    data = write_toy_questions(tmp_path / "q.jsonl")
    code, out = invoke("run", "--base-url", served, "--model", "toy", *_small(tmp_path, "r", data))
    assert code == 0, out
    assert "preset: default" in out and "served" in out
    config = yaml.safe_load((tmp_path / "r" / "config.yaml").read_text())
    assert config["hyper"]["max_tokens_solve"] > 1000  # the server limits, not quick's 120
    assert config["hyper"]["max_criteria"] == 30  # what `default` sets
    code, out = invoke("run", "--base-url", served, "--model", "toy", "--preset", "quick",
                       *_small(tmp_path, "q", data))
    assert code == 0 and "preset:" not in out  # a named preset is the user's: no note
    assert yaml.safe_load((tmp_path / "q" / "config.yaml").read_text())["hyper"]["max_tokens_solve"] == 120


def test_the_embedded_model_keeps_quick(tmp_path):
    from decoevo.cli.endpoint import choose_preset
    from decoevo.cli.settings import RunFlags, preset_choice

    assert preset_choice(RunFlags()).name == "quick"
    assert preset_choice(RunFlags(model=str(tmp_path / "m.gguf"))).name == "quick"
    assert preset_choice(RunFlags(base_url="http://h:1/v1")).name == "default"  # --model left out
    assert preset_choice(RunFlags(model="openai/gpt-4o")).name == "default"
    served = tmp_path / "run.yaml"
    served.write_text("lm: {models: {default: {backend: openai, base_url: 'http://h:1/v1', model: m}}}\n")
    assert preset_choice(RunFlags(config_file=served)).name == "default"
    assert preset_choice(RunFlags(config_file=served, preset="paper")).name == "paper"

    assert choose_preset(None, served=False).name == "quick"
    assert choose_preset(None, served=True).name == "default"
    assert choose_preset("paper", served=False).name == "paper"
    assert choose_preset("paper", served=False).reason is None


def test_a_model_the_server_does_not_serve_is_refused_before_spending(served, tmp_path):
    """Item 2: --model gpt-4o at a server listing only `toy`: exit 2, nothing written; the flag allows it."""
    data = write_toy_questions(tmp_path / "q.jsonl")
    code, out = invoke("run", "--base-url", served, "--model", "gpt-4o", *_small(tmp_path, "x", data))
    assert code == 2, out
    assert "does not serve it" in out and "lists: toy" in out and "--any-model" in out
    assert not (tmp_path / "x").exists()
    code, out = invoke("run", "--base-url", served, "--model", "gpt-4o", "--any-model",
                       *_small(tmp_path, "y", data))
    assert code == 0, out  # the toy server answers any name, as llama.cpp's does
    code, out = invoke("doctor", "--base-url", served, "--model", "gpt-4o")
    assert code == 2 and "lists: toy" in out
    code, out = invoke("doctor", "--base-url", served, "--model", "toy")
    assert code == 0 and "serves: toy" in out and "structured call OK" in out


def test_provider_model_and_bare_names(monkeypatch, tmp_path):
    """Item 3: openai/gpt-4o is OpenAI's address and key variable; a bare name says to pass --base-url."""
    from decoevo.cli.settings import RunFlags, run_configs

    def no_data(data, fmt, benchmark):
        return data, fmt

    [config] = run_configs(RunFlags(model="openai/gpt-4o"), no_data)
    spec = config.lm.models["default"]
    assert (spec.backend, spec.base_url, spec.model, spec.api_key_env) == (
        "openai", "https://api.openai.com/v1", "gpt-4o", "OPENAI_API_KEY")
    [config] = run_configs(RunFlags(model="meta-llama/Llama-3-8B", base_url="http://h:1/v1"), no_data)
    assert config.lm.models["default"].model == "meta-llama/Llama-3-8B"  # at a named server, names stay whole
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # a provider's API without its key: no call made
    code, out = invoke("run", "--model", "openai/gpt-4o", "--runs-root", str(tmp_path))
    assert code == 2 and "needs an API key: set $OPENAI_API_KEY" in out, out
    code, out = invoke("run", "--model", "gpt-4o", "--runs-root", str(tmp_path))
    assert code == 2 and "pass --base-url" in out and "openai/gpt-4o" in out and "gguf_path" not in out
    code, out = invoke("run", "--model", "nosuch/m", "--runs-root", str(tmp_path))
    assert code == 2 and "no provider 'nosuch'" in out and "--base-url URL --model NAME" in out
    assert not any(tmp_path.iterdir())


def test_limit_concurrency_and_version(served, tmp_path):
    data = write_toy_questions(tmp_path / "q.jsonl")
    code, out = invoke("run", "--base-url", served, "--model", "toy", "--limit", "9", "--concurrency", "3",
                       *_small(tmp_path, "l", data))
    assert code == 0, out
    config = yaml.safe_load((tmp_path / "l" / "config.yaml").read_text())
    assert config["data"]["limit"] == 9 and config["hyper"]["concurrency"] == 3
    splits = json.loads((tmp_path / "l" / "splits.json").read_text())
    assert len({q for ids in splits.values() for q in ids}) <= 9
    code, out = invoke("run", "--concurrency", "2", "--set", "hyper.concurrency=4", "--runs-root", str(tmp_path))
    assert code == 2 and "--concurrency" in out
    from decoevo import __version__

    code, out = invoke("--version")
    assert code == 0 and out == f"decoevo {__version__}"


def test_a_refused_connection_on_the_first_call_fails_at_once(tmp_path):
    """Item 7: no backoff for a server never reached (it was 10.9 s of retries), and no aiohttp internals."""
    started = time.monotonic()
    code, out = invoke("run", "--base-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m",
                       "--runs-root", str(tmp_path))
    elapsed = time.monotonic() - started
    assert code == 2 and "connection refused" in out and "ssl:default" not in out, out
    assert elapsed < 3.0, elapsed  # includes loading the data and the configuration


def test_a_refused_key_is_not_an_infrastructure_fault(tmp_path):
    from decoevo.cli.boundary import describe
    from decoevo.lm.errors import CredentialError, RetryableError
    from decoevo.testing.fake_openai import FakeOpenAI, Reply
    from decoevo.testing.server import serve_app

    assert "(credentials)" in describe(CredentialError("credentials refused (HTTP 401)")).message
    assert "(infrastructure)" in describe(RetryableError("server error 500")).message
    server = FakeOpenAI(lambda body, n: Reply(status=401, error_message="Incorrect API key provided."))
    with serve_app(server.app()) as url:
        code, out = invoke("run", "--base-url", f"{url}/v1", "--model", "m", "--preset", "quick",
                           "--runs-root", str(tmp_path))
    assert code == 2 and "failed (credentials): credentials refused (HTTP 401)" in out, out
    assert "(infrastructure)" not in out and ".." not in out.replace("...", "")


def test_the_toy_server_answers_the_graders_and_doctor(served):
    """Item 9: started alone it answers HealthBench's grader and doctor's probe (they were 500s)."""
    import httpx

    from decoevo.benchmarks.healthbench import grader
    from decoevo.cli.doctor import DoctorAnswer
    from decoevo.domain import GoldItem, Question, Turn

    question = Question(id="a", turns=[Turn(role="user", content="my knee hurts")], gold=None)
    for text, met in (("Gives safety advice: when to seek care", True), ("Recommends surgery", False)):
        msgs = grader.messages(question, "For your safety, see a doctor.", GoldItem(text=text, points=5))
        body = {"model": "toy", "messages": [{"role": m.role, "content": m.content} for m in msgs],
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": "ItemVerdict", "schema": grader.ItemVerdict.model_json_schema()}}}
        reply = httpx.post(f"{served}/chat/completions", json=body, timeout=10)
        assert reply.status_code == 200, reply.text
        assert json.loads(reply.json()["choices"][0]["message"]["content"])["met"] is met
    body = {"model": "toy", "messages": [{"role": "user", "content": "capital of France?"}],
            "response_format": {"type": "json_schema", "json_schema": {
                "name": "DoctorAnswer", "schema": DoctorAnswer.model_json_schema()}}}
    reply = httpx.post(f"{served}/chat/completions", json=body, timeout=10)
    assert reply.status_code == 200
    DoctorAnswer.model_validate_json(reply.json()["choices"][0]["message"]["content"])


def test_eval_concurrency_bounds_the_questions_graded_at_once(tmp_path, monkeypatch):
    """Item 3: `eval --concurrency 1` grades one question at a time (its rubric items together)."""
    from decoevo.testing import world
    from decoevo.testing.fake_openai import FakeOpenAI
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_reply

    data = write_toy_questions(tmp_path / "q.jsonl")
    delay = {"s": 0.0}  # while grading, answers take long enough to overlap in flight
    server = FakeOpenAI(lambda body, n: toy_reply(body, n, delay["s"]), models=("toy",))
    with serve_app(server.app()) as url:
        args = ["run", "--base-url", f"{url}/v1", "--model", "toy", "--data", str(data), "--task", "healthbench",
                "--runs-root", str(tmp_path), "--name", "r", "--set",
                "splits={train: 4, probe: 1, solver_gate: 2, generator_gate: 1, test: 6}",
                "--set", "hyper={steps: 1, batch_size: 2, audit_every: 1, rollouts: 2}"]
        assert invoke(*args)[0] == 0
        delay["s"] = 0.03
        seen = {}
        for concurrency in ("1", "6"):
            monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / f"cache-{concurrency}.sqlite"))  # each pays
            server.max_in_flight = 0
            code, out = invoke("eval", str(tmp_path / "r"), "--concurrency", concurrency, "--force")
            assert code == 0, out
            seen[concurrency] = server.max_in_flight
    assert seen["1"] <= len(world.GOLD_ITEMS) < seen["6"], seen


def test_a_sweep_chooses_its_preset_as_run_does(tmp_path):
    """A sweep against a server starts from `default` (it was `quick`, whatever the model) and says so; a
    preset the spec or --preset names is kept, and so is the one a continued sweep recorded."""
    from decoevo.sweep import build_spec

    told: list = []
    over = {"methods": ["decoevo"], "seeds": [0]}
    spec, _ = build_spec(tmp_path / "A", None, overrides=over, base_url="http://h:1/v1", model="m",
                         on_preset=told.append)
    assert spec.preset == "default" and told[0].name == "default" and "served" in told[0].reason
    told.clear()
    spec, _ = build_spec(tmp_path / "B", None, overrides=over, on_preset=told.append)
    assert spec.preset == "quick" and told[0].name == "quick"  # the embedded model
    told.clear()
    spec, _ = build_spec(tmp_path / "C", None, overrides={**over, "preset": "quick"}, base_url="http://h:1/v1",
                         on_preset=told.append)
    assert spec.preset == "quick" and not told  # --preset quick: the user's
    served = tmp_path / "grid.yaml"
    served.write_text(yaml.safe_dump({"methods": ["decoevo"], "seeds": [0], "benchmarks": [
        {"name": "t", "data": str(write_toy_questions(tmp_path / "q.jsonl"))}],
        "lm": {"models": {"default": {"backend": "openai", "model": "m", "base_url": "http://h:1/v1"}}}}))
    spec, _ = build_spec(tmp_path / "D", served, on_preset=told.append)
    assert spec.preset == "default" and told  # a spec file whose model is served, without a preset
    from decoevo.engine.config import SERVER_TOKEN_LIMITS
    from decoevo.sweep import plan

    small = {"train": 4, "probe": 1, "solver_gate": 2, "generator_gate": 1, "test": 2}
    [cell] = plan(spec.model_copy(update={"splits": small}), tmp_path / "D")
    assert cell.config["hyper"]["max_tokens_solve"] == SERVER_TOKEN_LIMITS["max_tokens_solve"][1]  # was 320
    told.clear()
    (tmp_path / "E").mkdir()
    (tmp_path / "E" / "sweep.yaml").write_text(spec.model_copy(update={"preset": "paper"}).to_yaml())
    spec, _ = build_spec(tmp_path / "E", None, on_preset=told.append)
    assert spec.preset == "paper" and not told  # a continued sweep keeps what it recorded


def test_the_api_refuses_a_model_the_server_does_not_serve(served, tmp_path):
    """The library's optimize() checks /models as the command line does, before a call or a file."""
    import decoevo
    from decoevo.errors import ConfigError
    from decoevo.lm import ModelSpec

    questions = [json.loads(line) for line in write_toy_questions(tmp_path / "q.jsonl").read_text().splitlines()]
    small = {"splits": {"train": 4, "probe": 1, "solver_gate": 2, "generator_gate": 1, "test": 0},
             "hyper": {"steps": 1, "batch_size": 2, "audit_every": 1, "rollouts": 2}}
    with pytest.raises(ConfigError, match=r"lm.model gpt-4o: .* does not serve it .*lists: toy.*allow_unlisted=True"):
        decoevo.optimize(questions, lm=ModelSpec(backend="openai", base_url=served, model="gpt-4o"),
                         run_dir=tmp_path / "x",
                         hyper=small["hyper"], splits=small["splits"])
    assert not (tmp_path / "x").exists()
    result = decoevo.optimize(questions, lm=ModelSpec(backend="openai", base_url=served, model="gpt-4o"),
                              run_dir=tmp_path / "y", hyper=small["hyper"], splits=small["splits"],
                              allow_unlisted=True)
    assert (result.run_dir / "summary.json").is_file()  # the toy server answers any name


def test_a_question_file_too_small_for_default_names_both_ways_out(tmp_path):
    """A served run starts from `default` (24 questions): on 16 it says to shrink the splits or take
    --preset quick; a run already on quick is not told to take quick."""
    data = write_toy_questions(tmp_path / "q.jsonl")  # 16 questions
    dead = f"http://127.0.0.1:{free_port()}/v1"  # refused before any call
    code, out = invoke("run", "--base-url", dead, "--model", "m", "--any-model", "--data", str(data),
                       "--task", "healthbench", "--runs-root", str(tmp_path / "runs"))
    assert code == 2, out
    assert "ask for 24 questions but the data has 16" in out and "--set splits.test=N" in out
    assert "--preset quick (its splits take 12 questions" in out
    code, out = invoke("sweep", str(tmp_path / "SW"), "--base-url", dead, "--model", "m", "--data", str(data),
                       "--task", "healthbench")  # a sweep's plan says the same, before any cell runs
    assert code == 2 and "preset: default" in out and "--preset quick (its splits take 12 questions" in out, out
    few = tmp_path / "few.jsonl"
    few.write_text("".join(data.read_text().splitlines(keepends=True)[:10]))
    code, out = invoke("run", "--base-url", dead, "--model", "m", "--any-model", "--preset", "quick", "--data",
                       str(few), "--task", "healthbench", "--runs-root", str(tmp_path / "runs"))
    assert code == 2 and "ask for 12 questions but the data has 10" in out and "--preset quick" not in out, out
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())
