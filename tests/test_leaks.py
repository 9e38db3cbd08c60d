"""No secret reaches anything decoevo stores or prints (issue 21, item 1).

A real server on 127.0.0.1 (`decoevo.testing.leaky_server`) echoes the API key in every field of every
reply, in error bodies and in headers; URL inputs (`--data`, `DECOEVO_DATA_MIRROR`, `--track-uri`) carry
passwords and tokens. A run, its evaluation, its report and its MLflow mirror are made, and then every
output is searched for each secret: every file under the test's directory (run directory with its
gzip transcripts unpacked, the request cache with its WAL, the data cache, the MLflow store, the report)
and every command's stdout and stderr.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import secrets
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from decoevo.redact import (
    MASK,
    PARTIAL,
    mask_secrets,
    redact,
    register_environment_secrets,
    register_url_secrets,
)
from decoevo.testing.leaky_server import LeakyServer
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import write_toy_questions

pytest.importorskip("uvicorn")


def secret(label: str) -> str:
    return f"sk-{label}-{secrets.token_hex(16)}"


def needles(*keys: str) -> list[str]:
    """Each secret and its random part (a server might echo only that)."""
    return [n for k in keys for n in (k, k.rsplit("-", 1)[1])]


def file_texts(root: Path) -> dict[str, str]:
    """Every file under `root` as text; gzip files (the run's transcripts) unpacked."""
    out = {}
    for path in sorted(root.rglob("*")):
        if path.is_file():
            data = path.read_bytes()
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data) + b"\n" + data  # members concatenated: gzip reads them all
            out[str(path.relative_to(root))] = data.decode("utf-8", "replace")
    return out


def leaks(keys: list[str], texts: dict[str, str]) -> list[str]:
    """Where a needle occurs; also across line breaks (the terminal's wrapping splits a long URL)."""
    return sorted(
        {
            f"{where}: {n[:14]}..."
            for where, text in texts.items()
            for n in needles(*keys)
            if n in text or n in "".join(text.split())
        }
    )


def cli(args: list[str], env: dict[str, str], timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "decoevo", *args], capture_output=True, text=True, timeout=timeout, env=env
    )


def test_a_key_echoed_in_every_reply_field_and_url_secrets_reach_no_output(tmp_path: Path) -> None:
    key, data_token, data_password, mirror_password, track_password = (
        secret("key"),
        secret("datatok"),
        secret("datapw"),
        secret("mirror"),
        secret("track"),
    )
    keys = [key, data_token, data_password, mirror_password, track_password]
    questions = write_toy_questions(tmp_path / "toy.jsonl", n=20)
    server = LeakyServer({"toy.jsonl": questions.read_bytes()})
    questions.unlink()  # only the server has it now
    env = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "MLFLOW_TRACKING_URI")}
    env["MLFLOW_ALLOW_FILE_STORE"] = "true"  # MLflow 3 keeps its file store behind this switch
    env.update(
        DECOEVO_TEST_KEY=key,
        DECOEVO_CACHE=str(tmp_path / "cache" / "requests.sqlite"),
        DECOEVO_DATA=str(tmp_path / "data"),
    )
    track = importlib.util.find_spec("mlflow") is not None
    runs = tmp_path / "runs"
    outputs: dict[str, str] = {}
    with serve_app(server.app()) as url:
        args = [
            "run",
            "--base-url",
            f"{url}/v1",
            "--model",
            "toy",
            "--task",
            "healthbench",
            "--data",
            f"{url}/data/toy.jsonl?token={data_token}",
            "--preset",
            "default",
            "--runs-root",
            str(runs),
            "--name",
            "leaky",
            "--seeds",
            "3",
            "--set",
            "splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 4}",
            "--set",
            "hyper={steps: 2, batch_size: 2, audit_every: 1, rollouts: 4}",
            "--set",
            "lm.models.default.api_key_env=DECOEVO_TEST_KEY",
            "--set",
            "lm.models.default.backoff_base_s=0.01",
        ]
        if track:
            args += ["--track", "mlflow", "--track-uri", f"file:{tmp_path / 'mlruns'}"]
        run = cli(args, env)
        assert run.returncode == 0, run.stdout + run.stderr
        evaluated = cli(["eval", str(runs / "leaky")], env)
        assert evaluated.returncode == 0, evaluated.stdout + evaluated.stderr
        report = cli(["report", str(runs / "leaky"), "-o", str(tmp_path / "report.html")], env)
        assert report.returncode == 0, report.stdout + report.stderr
        # URL inputs that fail: each message names the URL, never its password or token.
        failures = {
            "data URL with a password": cli(
                [
                    "run",
                    "--data",
                    f"{url.replace('://', f'://alice:{data_password}@')}/data/none.jsonl",
                    "--runs-root",
                    str(runs),
                ],
                env,
            ),
            "data URL with a token": cli(
                ["run", "--data", f"{url}/data/none.jsonl?token={data_token}", "--runs-root", str(runs)], env
            ),
            "mirror with a password": cli(
                ["data", "fetch", "healthbench"],
                {**env, "DECOEVO_DATA_MIRROR": url.replace("://", f"://bob:{mirror_password}@")},
            ),
            "mirror with a token": cli(
                ["data", "fetch", "healthbench"], {**env, "DECOEVO_DATA_MIRROR": f"{url}/data?sig={mirror_password}"}
            ),
            "base_url with a token": cli(["run", "--base-url", f"{url}/v1?key={key}", "--runs-root", str(runs)], env),
        }
        if track:
            failures["track URI with a password"] = cli(
                [
                    "run",
                    "--data",
                    str(tmp_path / "missing.jsonl"),
                    "--runs-root",
                    str(runs),
                    "--track",
                    "mlflow",
                    "--track-uri",
                    f"http://carol:{track_password}@127.0.0.1:1/",
                ],
                {**env, "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "5"},
            )
    for name, proc in failures.items():
        assert proc.returncode in (1, 2) and "Traceback" not in proc.stderr, f"{name}: {proc.stdout}{proc.stderr}"
    for name, proc in {"run": run, "eval": evaluated, "report": report, **failures}.items():
        outputs[f"{name} stdout"], outputs[f"{name} stderr"] = proc.stdout, proc.stderr

    # Not vacuous: the key was sent and echoed, refusals happened, the data came from the URL, and the
    # cache, the transcripts and MLflow were written.
    assert server.tokens == {key} and server.chat_requests > 50 and server.refused > 3
    texts = file_texts(tmp_path)
    assert any(name.endswith("transcripts.jsonl.gz") for name in texts)
    assert (runs / "leaky" / "eval").is_dir() and (tmp_path / "report.html").is_file()
    with sqlite3.connect(tmp_path / "cache" / "requests.sqlite") as db:
        stored = db.execute("SELECT text, finish_reason FROM completions").fetchall()
    assert stored and all(reason == MASK for _, reason in stored) and all(MASK in text for text, _ in stored)
    if track:
        assert any(name.startswith("mlruns/") and name.endswith(".md") for name in texts)  # skills mirrored
    found = leaks(keys, {**texts, **outputs})
    assert not found, "secrets leaked into: " + "; ".join(found)


def test_redaction_masks_registered_secrets_and_url_credentials() -> None:
    token = secret("unit")
    register_url_secrets(f"https://mirror.example/x?sig={token}")
    # Registered: masked wherever it appears, even outside a URL (a library quoting a host:port).
    assert mask_secrets(f"nonnumeric port: '{token}@h'") == f"nonnumeric port: '{MASK}@h'"
    cases = {
        "https://u:pw-123456@h.example/v1 failed": f"https://{MASK}@h.example/v1 failed",
        "GET https://h.example/f.jsonl?download=1&api_key=abc: 404": f"GET https://h.example/f.jsonl?download={MASK}"
        f"&api_key={MASK}: 404",
        "(see https://h.example/cb#access_token=xyz)": f"(see https://h.example/cb#access_token={MASK})",
        "https://ghp_TOKEN@github.com/o/r": f"https://{MASK}@github.com/o/r",
        "https://h.example/docs#section-2.": "https://h.example/docs#section-2.",  # no credential: untouched
        "Authorization: Bearer abc.def": f"Authorization: {MASK}",
    }
    for text, want in cases.items():
        assert redact(text) == want
        assert redact(redact(text)) == want  # masking twice changes nothing
    data = json.dumps({"a": [token, {"b": f"x {token}"}], token: 1})
    assert token not in redact(data)


async def test_a_key_cut_by_an_error_bodys_length_limit_is_masked(monkeypatch: pytest.MonkeyPatch) -> None:
    """A server that quotes the key where the error message is cut (300 characters) leaves a prefix of it:
    masked from its first PARTIAL characters on."""
    from decoevo.lm import LM, LMConfig, LMError, Message, ModelSpec
    from decoevo.testing.fake_openai import FakeOpenAI, Reply

    key = secret("cut")
    monkeypatch.setenv("DECOEVO_TEST_KEY", key)
    server = FakeOpenAI(lambda body, n: Reply(status=401, error_message="x" * 280 + f" {key} is not valid"))
    with serve_app(server.app()) as url:
        spec = ModelSpec(backend="openai", model="m", base_url=f"{url}/v1", api_key_env="DECOEVO_TEST_KEY")
        async with LM(LMConfig(models={"default": spec}, use_cache=False)) as lm:
            with pytest.raises(LMError) as caught:
                await lm.complete([Message("user", "q")], role="solve")
    assert "401" in str(caught.value) and MASK in str(caught.value)
    assert key[:PARTIAL] not in str(caught.value)



def test_a_cut_copy_is_masked_as_far_as_it_follows_the_key() -> None:
    """A copy of a registered key cut anywhere past its first PARTIAL characters is masked whole, up to where
    it stops following the key, and the text after it stays: no character of the key's tail is left."""
    from decoevo.redact import mask_secrets, register_secret

    key = secret("tail") + "Zq9"
    register_secret(key)
    for cut in (PARTIAL, PARTIAL + 1, len(key) // 2 + PARTIAL // 2, len(key) - 1):
        text = f"error: key {key[:cut]}… was refused"
        assert mask_secrets(text) == f"error: key {MASK}… was refused", cut

def test_credentials_in_the_environment_and_old_cache_rows_are_masked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from decoevo.lm import ModelSpec
    from decoevo.lm.cache import RequestCache
    from decoevo.lm.types import Completion

    provider_key, old_key = secret("provider"), secret("old")
    register_environment_secrets(
        {"ANTHROPIC_API_KEY": provider_key, "MAX_TOKENS": "100000", "TOKENIZERS_PARALLELISM": "false"}
    )
    assert mask_secrets(f"{provider_key} 100000 false") == f"{MASK} 100000 false"
    # A row cached unmasked (before the key was known, or by an older version) comes out masked.
    cache = RequestCache(tmp_path / "cache.sqlite")
    with sqlite3.connect(tmp_path / "cache.sqlite") as db:
        db.execute("INSERT INTO completions VALUES (?, ?, ?, ?, ?, ?, ?)", ("k", "m", f"a {old_key}", 1, 1, old_key, 0))
    assert cache.get("k") == Completion(f"a {old_key}", 1, 1, old_key)  # not known yet: nothing to mask
    monkeypatch.setenv("OLD_KEY_ENV", old_key)
    spec = ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1", api_key_env="OLD_KEY_ENV")
    assert spec.read_api_key() == old_key  # reading the key registers it
    assert cache.get("k") == Completion(f"a {MASK}", 1, 1, MASK)
    cache.close()


def test_a_debug_traceback_shows_no_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    """DECOEVO_DEBUG=1 lets the traceback through; its messages are masked first, the whole chain."""
    import traceback

    from decoevo.cli.boundary import DEBUG_ENV, run_guarded

    monkeypatch.setenv(DEBUG_ENV, "1")
    password = secret("debug")

    def fail() -> None:
        try:
            raise OSError(f"cannot reach http://u:{password}@mirror.example/x")
        except OSError as exc:
            raise RuntimeError(f"download of https://h.example/f?sig={password} failed") from exc

    def never(message: str, code: int) -> None:
        raise AssertionError("the debug path raises")

    with pytest.raises(RuntimeError) as caught:
        run_guarded(fail, never)  # type: ignore[arg-type]
    printed = "".join(traceback.format_exception(caught.value))
    assert "mirror.example" in printed and password not in printed


def test_a_sweep_cells_failure_is_kept_without_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A cell's unexpected error goes to its log, its outcome and the sweep's status: all masked."""
    from decoevo.cli import sweep_cell as cell

    password = secret("cell")

    def crash(request: object, run_dir: Path) -> str:
        raise RuntimeError(f"mirror http://u:{password}@mirror.example/x refused")

    monkeypatch.setattr(cell, "_train", crash)
    request = cell.CellRequest(cell_id="c0", run_dir=str(tmp_path / "run"), config={}, threads=1)
    outcome = cell.run_cell(request)
    printed = capsys.readouterr()
    assert not outcome.ok and outcome.error is not None and "mirror.example" in outcome.error
    assert password not in outcome.error + printed.out + printed.err


def test_a_report_over_an_older_runs_unmasked_key_masks_the_key_of_the_environment(tmp_path: Path) -> None:
    """A run written before this masking existed may hold the key in its skills; a report made where the
    key is set (OPENAI_API_KEY) does not carry it into the HTML."""
    from decoevo.testing.toy_server import toy_run_args, toy_server

    key = secret("older")
    data = write_toy_questions(tmp_path / "toy.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env["DECOEVO_CACHE"] = str(tmp_path / "cache.sqlite")
    with serve_app(toy_server().app()) as url:
        run = cli(toy_run_args(f"{url}/v1", data, tmp_path / "runs", "older", steps=1), env)
    assert run.returncode == 0, run.stdout + run.stderr
    run_dir = tmp_path / "runs" / "older"
    for skill in (run_dir / "skills").rglob("v*.md"):  # what an older version may have written
        skill.write_text(skill.read_text() + f"\nThe key is {key}.\n")
    report = cli(["report", str(run_dir), "-o", str(tmp_path / "report.html")], {**env, "OPENAI_API_KEY": key})
    assert report.returncode == 0, report.stdout + report.stderr
    html = (tmp_path / "report.html").read_text()
    assert "The key is" in html and key not in html


def test_an_environment_path_to_a_credential_is_not_masked(tmp_path: Path) -> None:
    """A variable naming where a credential lives is not the credential: registered, its path (and through the
    cut-copy rule every path sharing its first characters, e.g. the checkout's) was masked in every error."""
    creds = tmp_path / "service-account.json"
    creds.write_text("{}", encoding="utf-8")
    token = secret("env")
    register_environment_secrets({"GOOGLE_APPLICATION_CREDENTIALS": str(creds), "HF_TOKEN_PATH": str(tmp_path / "t"),
                                  "SERVICE_API_KEY_FILE": "relative/key.txt", "SERVICE_TOKEN": token})
    shown = f"cannot read {tmp_path / 'questions.jsonl'} (see {creds}); relative/key.txt"
    assert mask_secrets(f"{shown}; {token}") == f"{shown}; {MASK}"
