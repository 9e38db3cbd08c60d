"""The API key reaches the server as the bearer token and nowhere else: not the run directory, not the
request cache, not the CLI's output; also when the server rejects it."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import pytest

from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

pytest.importorskip("uvicorn")

Scope = MutableMapping[str, Any]
ASGIApp = Callable[[Scope, Callable[[], Awaitable[Any]], Callable[[Any], Awaitable[None]]], Awaitable[None]]


class AuthLog:
    """ASGI wrapper that records the Authorization header of every request."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self.tokens: list[str] = []

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] == "http":
            self.tokens.append(dict(scope["headers"]).get(b"authorization", b"").decode())
        await self.app(scope, receive, send)


def fake_key() -> str:
    return f"sk-test-{secrets.token_hex(20)}"


def run_cli(server: FakeOpenAI, tmp_path: Path, name: str, env: dict[str, str], sets: tuple[str, ...]
            ) -> tuple[subprocess.CompletedProcess[str], AuthLog]:
    data = write_toy_questions(tmp_path / "toy.jsonl")
    app = AuthLog(server.app())
    with serve_app(app) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", name, steps=1, sets=sets)
        base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "DECOEVO_TEST_KEY")}
        proc = subprocess.run([sys.executable, "-m", "decoevo", *args], capture_output=True, text=True, timeout=120,
                              env={**base, "DECOEVO_CACHE": str(tmp_path / "cache" / "requests.sqlite"), **env})
    return proc, app


def assert_not_leaked(key: str, tmp_path: Path, proc: subprocess.CompletedProcess[str], keep_out: Path | None = None
                      ) -> int:
    """No file under tmp_path (run directory, cache with its WAL) and no output holds the key or its random
    part; returns how many files were checked."""
    needles = [key.encode(), key.removeprefix("sk-test-").encode()]
    checked = 0
    for path in tmp_path.rglob("*"):
        if not path.is_file() or path == keep_out:
            continue
        data = path.read_bytes()
        assert not any(n in data for n in needles), f"the API key leaked into {path.relative_to(tmp_path)}"
        checked += 1
    for stream, text in (("stdout", proc.stdout), ("stderr", proc.stderr)):
        assert not any(n.decode() in text for n in needles), f"the API key leaked into {stream}"
    return checked


def test_key_from_env_var_is_sent_and_never_written(tmp_path: Path) -> None:
    key = fake_key()
    proc, auth = run_cli(toy_server(), tmp_path, "env", {"DECOEVO_TEST_KEY": key},
                         ("lm.models.default.api_key_env=DECOEVO_TEST_KEY",))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(auth.tokens) > 10 and set(auth.tokens) == {f"Bearer {key}"}  # the key was used: not vacuous
    run_dir = tmp_path / "runs" / "env"
    assert (run_dir / "checkpoint.json").is_file() and (tmp_path / "cache" / "requests.sqlite").is_file()
    assert "DECOEVO_TEST_KEY" in (run_dir / "config.yaml").read_text()  # the variable's name is recorded
    assert assert_not_leaked(key, tmp_path, proc) >= 10


def test_key_from_key_file_is_sent_and_never_written(tmp_path: Path) -> None:
    key = fake_key()
    key_file = tmp_path / "secret" / "key.txt"
    key_file.parent.mkdir()
    key_file.write_text(key + "\n")
    proc, auth = run_cli(toy_server(), tmp_path, "file", {}, (f"lm.models.default.api_key_file={key_file}",))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert len(auth.tokens) > 10 and set(auth.tokens) == {f"Bearer {key}"}
    assert str(key_file) in (tmp_path / "runs" / "file" / "config.yaml").read_text()  # the path, not the key
    assert assert_not_leaked(key, tmp_path, proc, keep_out=key_file) >= 10


def test_rejected_key_is_not_echoed(tmp_path: Path) -> None:
    """A 401 stops the run with a message that names the variable, not its value."""
    key = fake_key()
    server = FakeOpenAI(lambda body, n: Reply(status=401))
    proc, auth = run_cli(server, tmp_path, "rejected", {"DECOEVO_TEST_KEY": key},
                         ("lm.models.default.api_key_env=DECOEVO_TEST_KEY",))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert auth.tokens and set(auth.tokens) == {f"Bearer {key}"}
    assert "DECOEVO_TEST_KEY" in proc.stderr and "401" in proc.stderr
    assert_not_leaked(key, tmp_path, proc)
