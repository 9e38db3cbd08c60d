"""A planted API key never leaves the backend in an error, on any error path: not in the message, not in
the exception chain, not in the request cache; and end to end not in the run directory, the CLI's output
or the HTML report (a misbehaving server on 127.0.0.1 makes aiohttp quote the request headers)."""

from __future__ import annotations

import itertools
import json
import os
import secrets
import socket
import subprocess
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pydantic import BaseModel

from decoevo.lm import LM, LMConfig, LMError, Message, ModelSpec
from decoevo.lm.backend_secrets import Redactor
from decoevo.lm.cache import RequestCache
from decoevo.redact import MASK, redact_url
from decoevo.testing import world
from decoevo.testing.toy_server import toy_run_args, write_toy_questions

Handler = Callable[[bytes, str], bytes | None]  # (request bytes, key) -> raw reply, or None to hang up


class Answer(BaseModel):
    answer: str


@contextmanager
def raw_server(handler: Handler, key: str) -> Iterator[str]:
    """A TCP server on 127.0.0.1 that reads one HTTP request per connection and writes whatever
    `handler` returns, verbatim (no HTTP framing is guaranteed: that is the point)."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.2)
    stop = threading.Event()

    def serve_one(conn: socket.socket) -> None:
        with conn:
            conn.settimeout(5)
            data = b""
            try:
                while b"\r\n\r\n" not in data:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    data += chunk
                head, _, body = data.partition(b"\r\n\r\n")
                length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(body) < length:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    body += chunk
                reply = handler(head + b"\r\n\r\n" + body, key)
                if reply is not None:
                    conn.sendall(reply)
            except OSError:
                return

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def http(status: str, body: str, content_type: str = "application/json") -> bytes:
    data = body.encode()
    return (f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
            f"Connection: close\r\n\r\n").encode() + data


def chat(content: str | None, **message: object) -> str:
    return json.dumps({"choices": [{"index": 0, "finish_reason": "stop",
                                    "message": {"role": "assistant", "content": content, **message}}],
                       "usage": {"prompt_tokens": 3, "completion_tokens": 3}})


# Every way a reply can go wrong that the backend turns into an error message. Several quote the key back.
ERROR_PATHS: dict[str, Handler] = {
    "malformed status line": lambda req, key: b"HTTP/1.1 abc OK\r\nContent-Length: 0\r\n\r\n",
    "not http at all (a TLS port)": lambda req, key: b"\x15\x03\x01\x00\x02\x02\x28" + b"\x00" * 40,
    "bad header line": lambda req, key: b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n",
    "401 body echoes the key": lambda req, key: http("401 Unauthorized",
                                                     json.dumps({"error": {"message": f"bad key {key}"}})),
    "400 body echoes the headers": lambda req, key: http("400 Bad Request", json.dumps(
        {"detail": req.split(b"\r\n\r\n")[0].decode()})),
    "403 plain text echo": lambda req, key: http("403 Forbidden", f"Authorization: Bearer {key}", "text/plain"),
    "500 echoes the key": lambda req, key: http("500 Internal Server Error", f"oops {key}", "text/plain"),
    "refusal echoes the key": lambda req, key: http("200 OK", chat(None, refusal=f"I will not use {key}")),
    "truncated body": lambda req, key: (b"HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n"
                                        + f'{{"key": "{key}"'.encode()),
    "malformed json echoes the key": lambda req, key: http("200 OK", f'{{"choices": "{key}"'),
    "hang up": lambda req, key: None,
}


def fake_key() -> str:
    return f"sk-test-{secrets.token_hex(20)}"


def needles(key: str) -> list[str]:
    return [key, key.removeprefix("sk-test-")]


def assert_clean(text: str, key: str, where: str) -> None:
    for needle in needles(key):
        assert needle not in text, f"the API key leaked into {where}: {text[:400]}"


@pytest.mark.parametrize("path", sorted(ERROR_PATHS))
async def test_every_backend_error_path_is_redacted(path: str, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    key = fake_key()
    monkeypatch.setenv("DECOEVO_TEST_KEY", key)
    cache = RequestCache(tmp_path / "cache.sqlite")
    with raw_server(ERROR_PATHS[path], key) as url:
        spec = ModelSpec(backend="openai", model="m", base_url=f"{url}/v1", api_key_env="DECOEVO_TEST_KEY",
                         max_retries=1, backoff_base_s=0.01, timeout_s=5)
        async with LM(LMConfig(models={"default": spec}, max_repairs=0), cache=cache) as lm:
            with pytest.raises(LMError) as caught:
                await lm.complete([Message("user", "q")], role="solve", schema=Answer)
    exc = caught.value
    # The message, the repr and the whole printed chain (what a traceback or a logger would show).
    assert_clean(str(exc), key, "the error message")
    assert_clean(repr(exc), key, "the error repr")
    assert_clean("".join(traceback.format_exception(exc)), key, "the traceback")
    for file in tmp_path.iterdir():
        assert_clean(file.read_bytes().decode("utf-8", "replace"), key, f"the cache file {file.name}")


async def test_a_reply_that_echoes_the_key_is_cached_without_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    key = fake_key()
    monkeypatch.setenv("DECOEVO_TEST_KEY", key)
    cache = RequestCache(tmp_path / "cache.sqlite")
    with raw_server(lambda req, k: http("200 OK", chat(f"your key is {k}")), key) as url:
        spec = ModelSpec(backend="openai", model="m", base_url=f"{url}/v1", api_key_env="DECOEVO_TEST_KEY")
        async with LM(LMConfig(models={"default": spec}), cache=cache) as lm:
            result = await lm.complete([Message("user", "q")], role="solve")
    assert result.text == f"your key is {MASK}"
    cache.close()
    for file in tmp_path.iterdir():
        assert_clean(file.read_bytes().decode("utf-8", "replace"), key, f"the cache file {file.name}")


def test_redactor_masks_headers_keys_and_url_credentials() -> None:
    key = fake_key()
    r = Redactor.for_request({"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    text = r.text(f"<CIMultiDictProxy('Authorization': 'Bearer {key}', 'Content-Type': 'application/json')> "
                  f"raw={key} via http://alice:pw123@proxy:3128/ and authorization: Bearer other-token-1")
    assert key not in text and "pw123" not in text and "other-token-1" not in text
    assert "application/json" in text and "proxy:3128" in text  # only secrets go
    assert redact_url("https://u:p@h.example/v1") == f"https://{MASK}@h.example/v1"
    assert r.secret_values("a bearer of news at http://x@y") == "a bearer of news at http://x@y"


def test_an_errors_raw_reply_and_a_bare_credential_holding_a_space_are_masked() -> None:
    """A parse error keeps the model's raw reply (`ParseError.raw`, shown in events and the report): a server
    echoing the key there is masked like the message. A credential holding a space (a custom scheme's
    `Bearer part one`) is masked whole when echoed without its prefix, not only up to the space."""
    from decoevo.lm.errors import ParseError

    key, spaced = fake_key(), f"{fake_key()} {fake_key()}"
    r = Redactor.for_request({"Authorization": f"Bearer {key}", "Proxy-Authorization": f"Bearer {spaced}"})
    error = r.error(ParseError(f"no JSON in {key}", raw=f"the key is {key}"))
    assert key not in str(error) and key not in error.raw and MASK in error.raw
    echoed = r.secret_values(f"you sent {spaced}.")
    assert not any(part in echoed for part in spaced.split()), echoed


def test_a_base_url_with_credentials_is_refused() -> None:
    with pytest.raises(ValueError, match="must not carry credentials"):
        ModelSpec(backend="openai", model="m", base_url="https://user:sk-abc@api.example/v1")


def test_a_proxy_with_credentials_is_not_echoed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY with user:password pointing at a closed port: the connect error names the proxy."""
    import asyncio

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("HTTP_PROXY", f"http://alice:proxy-secret-99@127.0.0.1:{port}")
    monkeypatch.setenv("NO_PROXY", "")
    spec = ModelSpec(backend="openai", model="m", base_url="http://10.255.255.1:9/v1", max_retries=0, timeout_s=3)

    async def go() -> LMError:
        async with LM(LMConfig(models={"default": spec}, use_cache=False)) as lm:
            with pytest.raises(LMError) as caught:
                await lm.complete([Message("user", "q")], role="solve")
        return caught.value

    exc = asyncio.run(go())
    assert "proxy-secret-99" not in "".join(traceback.format_exception(exc))


def answered_then(n: int, garbled: Handler) -> Handler:
    """The toy world's answer to the first `n` chat requests, then `garbled` (the run then stops with
    answered calls, so its directory is kept: a run with none leaves nothing behind)."""
    answered = itertools.count()

    def handler(request: bytes, key: str) -> bytes | None:
        head, _, raw = request.partition(b"\r\n\r\n")
        if not head.startswith(b"POST") or next(answered) >= n:
            return garbled(request, key)
        body = json.loads(raw)
        return http("200 OK", chat(world.respond(body["messages"], world.schema_of(body), world.sample_index_of(body))))

    return handler


def test_cli_run_against_a_garbled_server_leaks_nothing(tmp_path: Path) -> None:
    """End to end: a run stopped by a reply aiohttp quotes with our headers; the run directory, the cache
    (with its WAL), stdout/stderr and the report over that run hold no trace of the key."""
    key = fake_key()
    data = write_toy_questions(tmp_path / "toy.jsonl")
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    env.update(DECOEVO_TEST_KEY=key, DECOEVO_CACHE=str(tmp_path / "cache" / "requests.sqlite"))
    with raw_server(answered_then(2, ERROR_PATHS["malformed status line"]), key) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "garbled", steps=1,
                            sets=("lm.models.default.api_key_env=DECOEVO_TEST_KEY", "lm.models.default.max_retries=0"))
        proc = subprocess.run([sys.executable, "-m", "decoevo", *args], capture_output=True, text=True,
                              timeout=120, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    report = subprocess.run([sys.executable, "-m", "decoevo", "report", str(tmp_path / "runs" / "garbled"),
                             "-o", str(tmp_path / "report.html")], capture_output=True, text=True, timeout=120,
                            env=env)
    assert (tmp_path / "report.html").is_file(), report.stderr
    events = (tmp_path / "runs" / "garbled" / "events.jsonl").read_text()
    assert '"stopped"' in events  # the error was recorded: the grep below is not vacuous
    checked = 0
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert_clean(path.read_bytes().decode("utf-8", "replace"), key, str(path.relative_to(tmp_path)))
            checked += 1
    assert checked >= 5
    for name, text in (("stdout", proc.stdout + report.stdout), ("stderr", proc.stderr + report.stderr)):
        assert_clean(text, key, name)
