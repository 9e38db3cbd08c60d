"""Values refused at the boundary before anything is billed or written: a model name that is the API key,
a base_url that is not an http(s) URL, and token counts in `requests.jsonl` no request ever had."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.lm import ModelSpec
from decoevo.rundir import RunReadError, prepare_resume
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

pytest.importorskip("uvicorn")
runner = CliRunner()
KEY = "sk-round4-model-key-0123456789"


def said(result: object) -> str:
    return " ".join(result.output.split())  # type: ignore[attr-defined]


def one_line(result: object) -> bool:
    """One message (the terminal wraps it to its width), no traceback."""
    out = result.output  # type: ignore[attr-defined]
    return said(result).startswith("error:") and said(result).count("error:") == 1 and "Traceback" not in out


@pytest.fixture
def toy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, Path, object]]:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    server = toy_server(0.0)
    with serve_app(server.app()) as url:
        yield f"{url}/v1", write_toy_questions(tmp_path / "toy.jsonl"), server


# ---- item 2: a model name that is the key -----------------------------------------------------------

def test_a_model_name_equal_to_the_api_key_is_refused_before_anything_is_written(
        toy: tuple[str, Path, object], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: the key went into the cache's model column and cache/endpoints.json, and config.yaml held
    `model: [redacted]`, so eval and resume of the run failed. Now: one line, exit 2, nothing written."""
    base_url, data, server = toy
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    args = toy_run_args(base_url, data, tmp_path / "runs", "keyed", steps=1)
    args[args.index("--model") + 1] = KEY
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "model holds the API key" in said(result) and one_line(result)
    assert KEY not in result.output
    assert server.requests == []  # type: ignore[attr-defined]
    assert not (tmp_path / "runs" / "keyed").exists()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path


def test_a_key_read_from_a_file_that_is_also_the_model_name_is_refused(tmp_path: Path) -> None:
    """A key first read from api_key_file (the validator cannot know it yet) is refused when it is read."""
    fresh = "sk-round4-file-key-9876543210"  # never registered in this process before
    key_file = tmp_path / "key"
    key_file.write_text(fresh + "\n")
    spec = ModelSpec(backend="openai", model=fresh, base_url="http://127.0.0.1:9/v1", api_key_file=str(key_file),
                     api_key_env="DECOEVO_TEST_UNSET_KEY")
    from decoevo.lm.errors import ConfigError
    with pytest.raises(ConfigError, match="model name holds the API key") as caught:
        spec.read_api_key()
    assert fresh not in str(caught.value)


def test_a_placeholder_key_inside_a_model_name_is_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """Ollama's documented placeholder key is "ollama"; "ollama/llama3" is a model name, not a leak."""
    monkeypatch.setenv("OPENAI_API_KEY", "ollama")
    assert ModelSpec(backend="litellm", model="ollama/llama3").model == "ollama/llama3"
    with pytest.raises(ValueError, match="model holds the API key"):
        ModelSpec(backend="litellm", model="ollama")
    monkeypatch.setenv("DECOEVO_TEST_KEY_VAR", KEY)  # a long key is found inside a name too
    with pytest.raises(ValueError, match="model holds the API key"):
        ModelSpec(backend="openai", model=f"prefix-{KEY}", base_url="http://127.0.0.1:9/v1",
                  api_key_env="DECOEVO_TEST_KEY_VAR")


# ---- item 10: base_url and recorded token counts ----------------------------------------------------

@pytest.mark.parametrize("base_url", ["not a url", "ftp://127.0.0.1/v1", "file:///tmp/v1", "http://", "127.0.0.1:8000"])
def test_a_base_url_that_is_not_http_is_refused_before_a_run_directory_exists(
        toy: tuple[str, Path, object], tmp_path: Path, base_url: str) -> None:
    """Before: `--base-url 'not a url'` made the run, billed 4 estimated calls (10,222 tokens) for requests
    that never left the process, and advised a resume."""
    _, data, _ = toy
    args = toy_run_args(base_url, data, tmp_path / "runs", "bad", steps=1)
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "not an http(s) URL" in said(result) and one_line(result), result.output
    assert not (tmp_path / "runs").exists() or list((tmp_path / "runs").iterdir()) == []


@pytest.mark.parametrize("value", ["-5", "1e30", "Infinity", "NaN", "1.5", "true", '"12"', "1000000000001"])
def test_resume_refuses_a_token_count_no_request_had(
        toy: tuple[str, Path, object], tmp_path: Path, value: str) -> None:
    """Before: a negative or 10^30 count in requests.jsonl went into the ledger on resume (`Infinity` was
    a traceback). Now: one line naming the file, line and field; nothing is written."""
    base_url, data, _ = toy
    run = tmp_path / "runs" / "r"
    assert runner.invoke(app, toy_run_args(base_url, data, tmp_path / "runs", "r", steps=1)).exit_code == 0
    (run / "summary.json").unlink()  # as if killed after its last checkpoint
    requests = run / "requests.jsonl"
    lines = requests.read_bytes().splitlines()
    forged = (b'{"sent": "dead-1", "key": "k", "role": "solver", "model": "default", "prompt_tokens": '
              + value.encode() + b', "max_tokens": 64}')
    requests.write_bytes(b"\n".join([*lines, forged]) + b"\n")
    before = {p.name: p.read_bytes() for p in run.iterdir() if p.is_file()}
    result = runner.invoke(app, ["resume", str(run)])
    assert result.exit_code == 2, result.output
    text = "".join(result.output.split())  # the terminal wraps the path anywhere
    named = "holds" + value if value in ("Infinity", "NaN") else "'prompt_tokens'"  # JSON's non-numbers by name
    assert "requests.jsonl:line" in text and named in text and "bug" not in text, result.output
    assert {p.name: p.read_bytes() for p in run.iterdir() if p.is_file() and p.name != ".lock"} == {
        k: v for k, v in before.items() if k != ".lock"}
    with pytest.raises(RunReadError, match=f"line {len(lines) + 1}"):
        prepare_resume(run)
    assert json.loads(lines[0])["prompt_tokens"] >= 0  # the real records pass the same check


def test_a_call_line_with_an_absurd_count_never_reaches_the_ledger(toy: tuple[str, Path, object],
                                                                   tmp_path: Path) -> None:
    """The call log's readers skip a garbage line; a count of 10^30 or −5 tokens is one now (before, the
    resume added it to the ledger as a paid call)."""
    base_url, data, _ = toy
    run = tmp_path / "runs" / "r"
    assert runner.invoke(app, toy_run_args(base_url, data, tmp_path / "runs", "r", steps=1)).exit_code == 0
    honest = json.loads((run / "ledger.json").read_text())["total"]
    (run / "summary.json").unlink()
    with (run / "calls.jsonl").open("a") as log:
        for count in (10**30, -5):
            log.write(json.dumps({"role": "solve", "model": "default", "key": f"forged{count}", "cached": False,
                                  "prompt_tokens": count, "completion_tokens": 1}) + "\n")
    result = runner.invoke(app, ["resume", str(run)])
    assert result.exit_code == 0, result.output
    total = json.loads((run / "ledger.json").read_text())["total"]
    assert total["prompt_tokens"] == honest["prompt_tokens"] and total["calls"] == honest["calls"]
