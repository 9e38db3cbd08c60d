"""What a server can do to the client over HTTP, with real servers on loopback addresses: credentials
given for one origin never reach another through a redirect, an endless official-prompt file stops at
its ceiling, and a model server's gzip bomb is refused before it is inflated into memory."""

from __future__ import annotations

import base64
import gzip
import json
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.benchmarks import BENCHMARKS, datastore, templates
from decoevo.cli import app
from decoevo.errors import ConfigError

from .test_data import SCHOLAR, shared

runner = CliRunner()
TOY = b'{"id": "q1", "prompt": "What is 2+2?"}\n{"id": "q2", "prompt": "Name a colour."}\n'
KEY = "sk-round4-secret-0123456789"

Answer = Callable[[BaseHTTPRequestHandler], None]


@contextmanager
def serving(host: str, answer: Answer) -> Iterator[tuple[str, list[dict[str, str]]]]:
    """A threaded HTTP server on `host`; yields its base URL and the headers of every request it got."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            seen.append({k.lower(): v for k, v in self.headers.items()})
            answer(self)

        do_POST = do_GET

    try:
        server = ThreadingHTTPServer((host, 0), Handler)
    except OSError as exc:  # a system without the 127.0.0.0/8 loopback range
        pytest.skip(f"cannot listen on {host}: {exc}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://{host}:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def redirect_to(base: str) -> Answer:
    def answer(h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", base + h.path)
        h.send_header("Content-Length", "0")
        h.end_headers()
    return answer


def serve_bytes(files: dict[str, bytes]) -> Answer:
    def answer(h: BaseHTTPRequestHandler) -> None:
        body = files.get(h.path)
        if body is None:
            h.send_error(404)
            return
        h.send_response(200)
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        h.wfile.write(body)
    return answer


@pytest.fixture
def data_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DECOEVO_DATA", str(tmp_path / "data"))
    monkeypatch.delenv("DECOEVO_DATA_MIRROR", raising=False)
    return tmp_path


def _basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


# ---- item 1: credentials stay with their origin -------------------------------------------------------

def test_data_url_credentials_do_not_follow_a_redirect_to_another_host(data_home: Path) -> None:
    """`--data http://user:KEY@127.0.0.1/q.jsonl` answered by a 302 to 127.0.0.2: the first host gets the
    Basic authorization, the second never sees it (before the fix it got `Basic base64(user:KEY)`)."""
    with serving("127.0.0.2", serve_bytes({"/q.jsonl": TOY})) as (other, other_seen), \
            serving("127.0.0.1", redirect_to(other)) as (first, first_seen):
        url = first.replace("http://", f"http://user:{KEY}@") + "/q.jsonl"
        path, _ = datastore.choose_data(url, None, None)
    assert path is not None and Path(path).read_bytes() == TOY
    assert [h.get("authorization") for h in first_seen] == [_basic("user", KEY)]
    assert other_seen and all("authorization" not in h for h in other_seen)
    assert all(KEY not in str(h) for h in other_seen)


def test_a_same_origin_redirect_keeps_the_credentials(data_home: Path) -> None:
    files = {"/new/q.jsonl": TOY}

    def answer(h: BaseHTTPRequestHandler) -> None:
        if h.path == "/old/q.jsonl":
            h.send_response(302)
            h.send_header("Location", "/new/q.jsonl")
            h.send_header("Content-Length", "0")
            h.end_headers()
        else:
            serve_bytes(files)(h)

    with serving("127.0.0.1", answer) as (base, seen):
        url = base.replace("http://", f"http://user:{KEY}@") + "/old/q.jsonl"
        path, _ = datastore.choose_data(url, None, None)
    assert path is not None and Path(path).read_bytes() == TOY
    assert [h.get("authorization") for h in seen] == [_basic("user", KEY)] * 2


def test_mirror_credentials_do_not_follow_a_redirect_during_data_fetch(
        data_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """DECOEVO_DATA_MIRROR with credentials, redirecting every file to another host: the fetch completes
    from there, and that host never sees the Authorization header."""
    upstream = SCHOLAR.url.split("://", 1)[1]
    files = {"/" + upstream: shared("scholarqa_cs/test_configs_snippets.json").read_bytes()}
    with serving("127.0.0.2", serve_bytes(files)) as (other, other_seen), \
            serving("127.0.0.1", redirect_to(other)) as (first, first_seen):
        monkeypatch.setenv("DECOEVO_DATA_MIRROR", first.replace("http://", f"http://mirror:{KEY}@"))
        result = runner.invoke(app, ["data", "fetch", "scholarqa_cs"])
    assert result.exit_code == 0, result.output
    assert first_seen and all(h.get("authorization") == _basic("mirror", KEY) for h in first_seen)
    assert other_seen and all("authorization" not in h for h in other_seen)
    assert KEY not in result.output


# ---- item 6: official prompt files have a ceiling ----------------------------------------------------

def test_an_endless_official_prompt_file_stops_at_its_ceiling(data_home: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Before, a grader-prompt file had no ceiling (6.8 GB in 30 s from an endless server)."""
    sent = [0]

    def endless(h: BaseHTTPRequestHandler) -> None:
        h.send_response(200)
        h.end_headers()
        block = b"x" * (1 << 16)
        try:
            while sent[0] < 256 << 20:
                h.wfile.write(block)
                sent[0] += len(block)
        except OSError:  # the client hung up
            pass

    bench = BENCHMARKS["healthbench"]
    with serving("127.0.0.1", endless) as (base, _):
        monkeypatch.setenv("DECOEVO_DATA_MIRROR", base)
        with pytest.raises(ConfigError, match=r"more than the 4\.0 MiB this file may have") as caught:
            templates.fetch_templates(bench)
    assert "\n" not in str(caught.value)
    assert sent[0] < 32 << 20  # the client hung up near the ceiling (socket buffers hold the rest)
    folder = templates.template_dir(bench)
    assert not folder.exists() or [p for p in folder.rglob("*") if p.is_file()] == []


# ---- item 7: a model server's reply body is bounded after decoding ------------------------------------

def gzip_bomb(inflated: int, member: int = 16 << 20) -> bytes:
    """A gzip stream of `inflated` zero bytes: one member of `member` zeros repeated (RFC 1952 allows
    concatenated members), so it is built in milliseconds; about 1 MiB per GiB."""
    one = gzip.compress(b"\0" * member, compresslevel=9)
    return one * (inflated // member)


def gzipped(body: bytes) -> Answer:
    """A 200 whose body is `body` sent as is, declared gzip-encoded JSON."""
    def answer(h: BaseHTTPRequestHandler) -> None:
        h.rfile.read(int(h.headers.get("Content-Length") or 0))
        h.send_response(200)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Encoding", "gzip")
        h.send_header("Content-Length", str(len(body)))
        h.end_headers()
        with suppress(OSError):  # the client stopped reading and hung up
            h.wfile.write(body)
    return answer


CLIENT = """
import asyncio, sys
from decoevo.lm import GenParams, Message, ModelSpec
from decoevo.lm.openai_backend import OpenAIBackend
from decoevo.lm.types import BackendRequest

async def main():
    backend = OpenAIBackend(ModelSpec(backend="openai", model="m", base_url=sys.argv[1], max_retries=0))
    request = BackendRequest("m", (Message("user", "hi"),), GenParams(max_tokens=16))
    try:
        await backend.complete(request)
        print("ANSWERED")
    except Exception as exc:
        print(type(exc).__name__, exc)
    finally:
        await backend.aclose()
    # VmHWM: this process's own peak. ru_maxrss would also count the forked copy of the parent before exec
    # (the kernel keeps that copy's high-water mark), i.e. the test runner's size late in a suite (1.2 GB).
    hwm = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
    print("PEAK_MIB", int(hwm.split()[1]) // 1024)

asyncio.run(main())
"""


def test_a_gzip_bomb_from_a_model_server_fails_fast_with_bounded_memory(tmp_path: Path) -> None:
    """1 MiB on the wire inflating to 1 GiB. Before: the whole body was inflated into memory (5.3 GB RSS
    in the adversarial pass). Now reading stops at 32 MiB decoded: an OversizedReply, and the client's
    peak RSS stays far below the inflated size."""
    bomb = gzip_bomb(1 << 30)
    assert len(bomb) < 2 << 20

    with serving("127.0.0.1", gzipped(bomb)) as (base, seen):
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", CLIENT, f"{base}/v1"], capture_output=True, text=True,
                              timeout=120)
        took = time.monotonic() - started
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "OversizedReply" in out and "ran past 32 MiB" in out, out
    assert len(seen) == 1  # not retried: the same server would send the same
    peak = int(out.split("PEAK_MIB")[1].split()[0])
    assert peak < 400, f"peak RSS {peak} MiB for a 1 GiB bomb"
    assert took < 60


def test_a_gzip_bomb_as_the_model_list_is_cut_at_its_ceiling() -> None:
    """`GET /models` (the served-model identity a new run records) read whole before; now it stops at
    8 MiB decoded and the identity records the error instead."""
    from decoevo.engine.provenance import model_identities
    from decoevo.lm import LMConfig, ModelSpec

    bomb = gzip_bomb(256 << 20)

    with serving("127.0.0.1", gzipped(bomb)) as (base, _):
        spec = ModelSpec(backend="openai", model="m", base_url=f"{base}/v1")
        [identity] = model_identities(LMConfig(models={"default": spec}))
    assert identity.error is not None and "ran past 8 MiB" in identity.error


def test_the_model_list_is_read_decoded_and_a_redirect_is_not_followed() -> None:
    """The model list's reader (the standard library since issue 47.2, httpx before): a gzipped list in two
    members is read whole; a redirect is recorded as an error, never followed."""
    from decoevo.engine.provenance import model_identities
    from decoevo.lm import LMConfig, ModelSpec

    listing = json.dumps({"data": [{"id": "other"}, {"id": "m"}]}).encode()
    with serving("127.0.0.1", gzipped(gzip.compress(listing[:10]) + gzip.compress(listing[10:]))) as (base, seen):
        spec = ModelSpec(backend="openai", model="m", base_url=f"{base}/v1")
        [identity] = model_identities(LMConfig(models={"default": spec}))
    assert identity.error is None and identity.served == {"id": "m"} and identity.served_ids == ["other", "m"]
    assert "gzip" in seen[0]["accept-encoding"]

    def moved(h: BaseHTTPRequestHandler) -> None:
        h.send_response(302)
        h.send_header("Location", "http://127.0.0.1:9/v1/models")
        h.send_header("Content-Length", "0")
        h.end_headers()

    with serving("127.0.0.1", moved) as (base, seen):
        spec = ModelSpec(backend="openai", model="m", base_url=f"{base}/v1")
        [identity] = model_identities(LMConfig(models={"default": spec}))
    assert identity.error is not None and "302" in identity.error and len(seen) == 1


async def test_a_bomb_delivered_in_one_piece_is_inflated_only_to_the_ceiling() -> None:
    """aiohttp inflated each piece the socket delivered in one call: on a loaded machine a 1 MiB gzip bomb read
    at once became ~1 GiB before any check (1.2 GB RSS seen in the suite). The reader now inflates with a
    ceiling itself: even the whole bomb handed over in one read holds at most the ceiling plus one chunk."""
    import gzip
    import tracemalloc

    from decoevo.lm.bounded_body import read_bounded
    from decoevo.lm.errors import OversizedReply

    bomb = gzip.compress(b"\0" * (256 << 20), compresslevel=9)  # 256 MiB inflated, ~250 KiB on the wire

    class AllAtOnce:  # the socket's whole payload in the first read, whatever size was asked for
        def __init__(self) -> None:
            self.left = bomb

        async def read(self, n: int) -> bytes:
            out, self.left = self.left, b""
            return out

    tracemalloc.start()
    try:
        with pytest.raises(OversizedReply, match="ran past 8 MiB"):
            await read_bounded(AllAtOnce(), {"Content-Encoding": "gzip"}, 8 << 20, "the test server")  # type: ignore[arg-type]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, f"peak {peak >> 20} MiB for an 8 MiB ceiling"
    small = gzip.compress(b'{"ok": true}')
    assert await read_bounded(type("One", (), {"left": small, "read": AllAtOnce.read})(), {"Content-Encoding": "gzip"},
                              8 << 20, "s") == b'{"ok": true}'  # type: ignore[arg-type]
