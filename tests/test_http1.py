"""decoevo.lm.http1, the direct path's own HTTP/1.1 client, against small asyncio servers on 127.0.0.1 written
here: every framing a reply may use, every way one can go wrong, and the pool's reuse rules."""

from __future__ import annotations

import asyncio
import datetime
import gzip
import json
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from decoevo.lm import http1
from decoevo.lm.errors import OversizedReply
from decoevo.lm.http1 import Client, ConnectError, TransportError

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter, int], Awaitable[None]]
#: a hang guard only (a broken client would wait forever); never reached by a passing test
HANG_S = 20.0


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """One request's head and body, or None when the client closed the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    length = next((int(line.split(b":", 1)[1]) for line in head.lower().split(b"\r\n")
                   if line.startswith(b"content-length:")), 0)
    return head, await reader.readexactly(length)


@asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[tuple[str, list[int]]]:
    """A server on 127.0.0.1 calling `handler(reader, writer, n)` for its n-th connection (0-based); yields
    its origin and a list that counts the connections."""
    count: list[int] = []

    async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        count.append(1)
        try:
            await handler(reader, writer, len(count) - 1)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}", count
    finally:
        server.close()
        await server.wait_closed()


def client(origin: str, **kwargs: object) -> Client:
    options: dict = {"connect_timeout_s": 5.0, "max_idle": 4, "limit": 1 << 20, "where": "the test server",
                     **kwargs}
    return Client(origin, {"Authorization": "Bearer sk-test-secret"}, **options)


async def answer(writer: asyncio.StreamWriter, head: bytes, body: bytes = b"") -> None:
    writer.write(head + body)
    await writer.drain()


def ok(body: bytes, *extra: str) -> bytes:
    lines = "".join(f"{e}\r\n" for e in extra)
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{lines}\r\n".encode() + body


async def keep_answering(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reply: bytes) -> None:
    while await read_request(reader) is not None:
        await answer(writer, reply)


async def test_a_chunked_reply_with_extensions_and_trailers_is_read_and_its_connection_reused() -> None:
    seen: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while (request := await read_request(reader)) is not None:
            seen.append(request[0])
            await answer(writer, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-RateLimit-Remaining-Requests: 7"
                         b"\r\n\r\n5;name=value\r\nhello\r\n1;x\r\n \r\n5\r\nworld\r\n0;last\r\nX-Trailer: t\r\n\r\n")

    async with serving(handler) as (origin, connections):
        http = client(origin)
        replies = [await http.request("POST", "/v1/chat/completions", b'{"a": 1}') for _ in range(3)]
        await http.aclose()
    assert [(r.status, r.body) for r in replies] == [(200, b"hello world")] * 3
    assert replies[0].headers.get("x-ratelimit-remaining-requests") == "7"  # any case of the name
    assert replies[0].headers["X-RATELIMIT-REMAINING-REQUESTS"] == "7"
    assert len(connections) == 1  # one keep-alive connection for the three
    first = seen[0].decode()
    assert first.startswith("POST /v1/chat/completions HTTP/1.1\r\n") and "Content-Length: 8\r\n" in first
    assert f"Host: {origin.removeprefix('http://')}\r\n" in first


@pytest.mark.parametrize("framing", [b"5\r\nhelloXX0\r\n\r\n", b"5zz\r\nhello\r\n0\r\n\r\n", b"-5\r\nhello\r\n"])
async def test_bad_chunk_framing_is_a_transport_error(framing: bytes) -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        await answer(writer, b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + framing)
        await reader.read()  # stay open: the client must see the error in the bytes, not in a close

    async with serving(handler) as (origin, _):
        http = client(origin)
        with pytest.raises(TransportError, match="chunk"):
            await asyncio.wait_for(http.request("POST", "/", b"{}"), HANG_S)
        await http.aclose()


async def test_a_body_shorter_than_its_content_length_is_a_transport_error() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        await answer(writer, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", b'{"cut": "sho')

    async with serving(handler) as (origin, _):
        http = client(origin)
        with pytest.raises(TransportError, match="closed the connection before the reply was complete"):
            await asyncio.wait_for(http.request("POST", "/", b"{}"), HANG_S)
        await http.aclose()


@pytest.mark.parametrize("flood", ["bytes", "lines"])
async def test_an_oversized_header_block_is_refused_without_buffering_it(flood: str) -> None:
    """80 KiB of one header, or more header lines than allowed (each short): refused, the connection dropped,
    while the server still holds the connection open (the client must not wait for more)."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        lines = b"X-Big: " + b"a" * (80 << 10) + b"\r\n" if flood == "bytes" else b"X-N: 1\r\n" * 200
        await answer(writer, b"HTTP/1.1 200 OK\r\n" + lines + (b"\r\n" if flood == "lines" else b""))
        await reader.read()

    async with serving(handler) as (origin, _):
        http = client(origin)
        match = "header block ran past 64 KiB" if flood == "bytes" else "more than 128 header lines"
        with pytest.raises(TransportError, match=match):
            await asyncio.wait_for(http.request("POST", "/", b"{}"), HANG_S)
        await http.aclose()


async def wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(2000):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the condition never held")


async def test_an_idle_connection_the_server_closed_is_not_reused() -> None:
    """The classic stale keep-alive race: the server answers, then closes the idle connection. The next
    request goes on a fresh connection and succeeds (sent on the closed one it would never be answered)."""
    closed = asyncio.Event()

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 0:
            await read_request(reader)
            await answer(writer, ok(b"first"))
            writer.close()
            await writer.wait_closed()
            closed.set()
            return
        await keep_answering(reader, writer, ok(b"second"))

    async with serving(handler) as (origin, connections):
        http = client(origin)
        assert (await http.request("POST", "/", b"{}")).body == b"first"
        await closed.wait()
        [idle] = http._idle
        await wait_until(lambda: idle.broken)  # the client has seen the server's FIN
        reply = await asyncio.wait_for(http.request("POST", "/", b"{}"), HANG_S)
        await http.aclose()
    assert reply.body == b"second" and len(connections) == 2


@pytest.mark.parametrize("head", [b"HTTP/1.1 200 OK\r\nConnection: close\r\n", b"HTTP/1.0 200 OK\r\n"],
                         ids=["connection close", "http/1.0"])
async def test_a_reply_that_ends_its_connection_is_not_pooled(head: bytes) -> None:
    """The server keeps the socket open after saying the connection ends: the client must not send the next
    request on it (the server reads no more there)."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        await answer(writer, head + b"Content-Length: 2\r\n\r\nok")
        await reader.read()

    async with serving(handler) as (origin, connections):
        http = client(origin)
        first = await http.request("POST", "/", b"{}")
        assert http._idle == []
        second = await asyncio.wait_for(http.request("POST", "/", b"{}"), HANG_S)
        await http.aclose()
    assert first.body == second.body == b"ok" and len(connections) == 2


def reset(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0), not a FIN."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@pytest.mark.parametrize("framing", ["length", "until close"])
async def test_a_reset_mid_body_is_a_transport_error(framing: str) -> None:
    """A reply without a length ends where its connection does, but only a clean close ends it: a reset
    mid-body is a failure, not a shorter body."""
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        length = b"Content-Length: 100\r\n" if framing == "length" else b""
        await answer(writer, b"HTTP/1.1 200 OK\r\n" + length + b"\r\n", b'{"half": ')
        await asyncio.sleep(0.2)  # let the client read the part sent, so the reset comes mid-body
        reset(writer)

    async with serving(handler) as (origin, _):
        http = client(origin)
        with pytest.raises(TransportError, match="reset"):
            await asyncio.wait_for(http.request("POST", "/", b"{}"), HANG_S)
        await http.aclose()


async def test_a_body_until_close_a_204_an_interim_reply_and_a_malformed_status_line() -> None:
    replies = [b"HTTP/1.1 200 OK\r\n\r\nall of it", b"HTTP/1.1 204 No Content\r\n\r\n",
               b"HTTP/1.1 100 Continue\r\n\r\n" + ok(b"real"), b"HTTP/1.1 2x0 OK\r\nContent-Length: 0\r\n\r\n"]
    sent: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while await read_request(reader) is not None:
            sent.append(replies[len(sent)])
            await answer(writer, sent[-1])
            if len(sent) == 1:  # a body without a length: it ends with the connection
                return

    async with serving(handler) as (origin, connections):
        http = client(origin)
        assert (await http.request("POST", "/", b"{}")).body == b"all of it"
        assert (await asyncio.wait_for(http.request("POST", "/", b"{}"), HANG_S)).status == 204
        assert (await asyncio.wait_for(http.request("POST", "/", b"{}"), HANG_S)).body == b"real"
        with pytest.raises(TransportError, match="status line is not HTTP"):
            await asyncio.wait_for(http.request("POST", "/", b"{}"), HANG_S)
        await http.aclose()
    assert len(connections) == 2  # the 204 and the interim reply's connection was kept


async def test_a_redirect_is_returned_not_followed_and_a_gzip_body_is_inflated_to_its_ceiling() -> None:
    big = gzip.compress(b"\0" * (4 << 20))

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await read_request(reader)
        if n == 0:
            await answer(writer, b"HTTP/1.1 302 Found\r\nLocation: http://127.0.0.2:9/\r\nContent-Length: 0\r\n\r\n")
        else:
            await answer(writer, ok(big, "Content-Encoding: gzip"))
        await reader.read()

    async with serving(handler) as (origin, connections):
        http = client(origin)
        moved = await http.request("POST", "/", b"{}")
        assert moved.status == 302 and moved.headers["location"] == "http://127.0.0.2:9/"
        http._idle.clear()  # the next request on a connection of its own
        with pytest.raises(OversizedReply, match="ran past 1 MiB"):
            await http.request("POST", "/", b"{}")
        await http.aclose()
    assert len(connections) == 2


async def test_a_header_holding_a_line_break_is_refused_before_any_connection() -> None:
    with pytest.raises(ValueError, match="line break") as caught:
        Client("http://127.0.0.1:9", {"Authorization": "Bearer sk-x\r\nX-Injected: 1"}, connect_timeout_s=1,
               max_idle=1, limit=1, where="w")
    assert "sk-x" not in str(caught.value)


async def test_aclose_closes_idle_and_busy_connections() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        if n == 1:
            await keep_answering(reader, writer, ok(b"x"))
        else:
            await read_request(reader)
            await reader.read()  # never answers: busy until closed

    async with serving(handler) as (origin, connections):
        http = client(origin)
        busy = asyncio.ensure_future(http.request("POST", "/", b"{}"))
        await wait_until(lambda: len(connections) == 1)
        await http.request("POST", "/", b"{}")
        assert len(http._open) == 2 and len(http._idle) == 1
        conns = list(http._open)
        await http.aclose()
        assert http._open == set() and http._idle == []
        assert all(conn.lost.done() for conn in conns)  # each transport gone, not left to the 2 s bound
        with pytest.raises(TransportError):
            await busy
        with pytest.raises(TransportError, match="closed"):
            await http.request("POST", "/", b"{}")


async def test_a_refused_connection_says_so_in_words() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ConnectError, match=r"connection refused \(is the server running\?\)"):
        await client(f"http://127.0.0.1:{port}").request("POST", "/", b"{}")


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key (PEM files), made with `cryptography`."""
    pytest.importorskip("cryptography", reason="making a test certificate needs the cryptography package")
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "decoevo test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    cert_file, key_file = tmp_path / "cert.pem", tmp_path / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_file, key_file


async def test_https_verifies_the_server_and_reads_its_reply(tmp_path: Path) -> None:
    """Against a local TLS server: a client trusting its certificate gets the reply over TLS; the default
    verifying context refuses the self-signed certificate, in words."""
    cert, key = self_signed(tmp_path)
    server_tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_tls.load_cert_chain(cert, key)

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await keep_answering(reader, writer, ok(json.dumps({"tls": True}).encode()))

    async with serving(handler, tls=server_tls) as (origin, connections):
        trusting = client(origin, tls=ssl.create_default_context(cafile=str(cert)))
        replies = [await trusting.request("POST", "/v1/chat/completions", b"{}") for _ in range(2)]
        await trusting.aclose()
        default = client(origin)
        with pytest.raises(ConnectError, match=r"TLS certificate of 127\.0\.0\.1:\d+ was refused"):
            await default.request("POST", "/", b"{}")
    assert [json.loads(r.body) for r in replies] == [{"tls": True}] * 2 and len(connections) == 1
    assert http1.tls_context().verify_mode == ssl.CERT_REQUIRED


async def test_the_slots_are_read_without_aiohttp() -> None:
    """`capacity.read_slots` (a run's pre-flight) asks llama.cpp's /props with this client."""
    from decoevo.lm import ModelSpec
    from decoevo.lm.capacity import read_slots

    paths: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while (request := await read_request(reader)) is not None:
            paths.append(request[0].split(b" ")[1])
            await answer(writer, ok(b'{"total_slots": 3}') if b"/props" in request[0]
                         else b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

    async with serving(handler) as (origin, _):
        found = await read_slots(ModelSpec(backend="openai", model="m", base_url=f"{origin}/v1"))
    assert found is not None and found.slots == 3 and paths == [b"/props"]


def chat_reply(content: str) -> bytes:
    from decoevo.testing.fake_openai import chat_body

    return ok(chat_body(content, "m").encode(), "Content-Type: application/json")


async def test_the_backend_posts_directly_and_through_a_proxy_over_aiohttp(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a proxy the backend uses this client (origin-form target); with HTTP_PROXY set the same request
    goes through aiohttp to the proxy (absolute-form target), as before."""
    from decoevo.lm import GenParams, Message, ModelSpec
    from decoevo.lm.openai_backend import OpenAIBackend
    from decoevo.lm.types import BackendRequest

    targets: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while (request := await read_request(reader)) is not None:
            targets.append(request[0].split(b" ")[1])
            await answer(writer, chat_reply(f"answer {len(targets)}"))

    request = BackendRequest("m", (Message("user", "hi"),), GenParams(max_tokens=8))
    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with serving(handler) as (origin, _):
        direct = OpenAIBackend(ModelSpec(backend="openai", model="m", base_url=f"{origin}/v1"))
        assert (await direct.complete(request)).text == "answer 1"
        assert isinstance(direct._session, Client)
        await direct.aclose()
        monkeypatch.setenv("HTTP_PROXY", origin)
        proxied = OpenAIBackend(ModelSpec(backend="openai", model="m", base_url="http://models.invalid/v1"))
        assert (await proxied.complete(request)).text == "answer 2"
        assert not isinstance(proxied._session, Client)
        await proxied.aclose()
    assert targets == [b"/v1/chat/completions", b"http://models.invalid/v1/chat/completions"]


@pytest.mark.parametrize("proxied", [False, True], ids=["direct", "through a proxy"])
async def test_the_backend_reports_a_redirect_without_following_it(proxied: bool,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    from decoevo.lm import GenParams, InfrastructureError, Message, ModelSpec
    from decoevo.lm.openai_backend import OpenAIBackend
    from decoevo.lm.types import BackendRequest

    targets: list[bytes] = []

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while (request := await read_request(reader)) is not None:
            targets.append(request[0].split(b" ")[1])
            await answer(writer, b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://models.invalid/v1/moved"
                                 b"\r\nContent-Length: 0\r\n\r\n")

    for name in ("HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    async with serving(handler) as (origin, _):
        if proxied:
            monkeypatch.setenv("HTTP_PROXY", origin)
        base = "http://models.invalid/v1" if proxied else f"{origin}/v1"
        backend = OpenAIBackend(ModelSpec(backend="openai", model="m", base_url=base))
        with pytest.raises(InfrastructureError, match="HTTP 307"):
            await backend.complete(BackendRequest("m", (Message("user", "hi"),), GenParams(max_tokens=8)))
        await backend.aclose()
    assert len(targets) == 1


# ---- the backend over this client: what it makes of each reply (survivors of the round-nine mutation bench) ----

def backend_for(origin: str, **spec: object):  # type: ignore[no-untyped-def]
    from decoevo.lm import ModelSpec
    from decoevo.lm.openai_backend import OpenAIBackend

    return OpenAIBackend(ModelSpec(backend="openai", model="m", base_url=f"{origin}/v1", **spec))  # type: ignore[arg-type]


def ask(text: str = "hi", schema: dict | None = None):  # type: ignore[no-untyped-def]
    from decoevo.lm import GenParams, Message
    from decoevo.lm.types import BackendRequest

    return BackendRequest("m", (Message("user", text),), GenParams(max_tokens=8), json_schema=schema)


async def test_a_closed_backend_sends_nothing_more_on_its_loop() -> None:
    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        await keep_answering(reader, writer, chat_reply("ok"))

    async with serving(handler) as (origin, connections):
        backend = backend_for(origin)
        assert (await backend.complete(ask())).text == "ok"
        await backend.aclose()
        with pytest.raises(asyncio.CancelledError):
            await backend.complete(ask())
    assert len(connections) == 1 and backend._session is None


async def test_statuses_map_to_their_categories_and_rate_headers_reach_the_completion() -> None:
    """409 is retried like 408 and 5xx; 401 is a credential error (never retried); a success's x-ratelimit
    headers ride on its completion (the rate limiter reads them); a schema goes as json_schema, not strict."""
    from decoevo.lm.errors import CredentialError, RetryableError

    bodies: list[dict] = []
    replies = [b"HTTP/1.1 409 Conflict\r\nContent-Length: 0\r\n\r\n",
               b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n",
               chat_reply('{"a": 1}').replace(b"\r\n\r\n", b"\r\nx-ratelimit-remaining-requests: 0\r\n"
                                                          b"x-ratelimit-reset-requests: 2s\r\n\r\n", 1)]

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while (request := await read_request(reader)) is not None:
            bodies.append(json.loads(request[1]))
            await answer(writer, replies[len(bodies) - 1])

    async with serving(handler) as (origin, _):
        backend = backend_for(origin, structured_output="json_schema")
        with pytest.raises(RetryableError, match="server error 409"):
            await backend.complete(ask())
        with pytest.raises(CredentialError, match="HTTP 401"):
            await backend.complete(ask())
        schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
        done = await backend.complete(ask(schema=schema))
        await backend.aclose()
    assert done.rate is not None and done.rate.remaining_requests == 0 and done.rate.reset_requests_s == 2.0
    assert bodies[2]["response_format"]["json_schema"]["strict"] is False


async def test_a_request_that_timed_out_after_the_one_ahead_was_answered_is_quiet() -> None:
    """`RequestTimeout.quiet`: the endpoint answered nothing after this request's clock last restarted. A request
    queued behind another restarts its clock at that answer; when it then times out, the endpoint has been quiet
    since exactly that answer (last == anchor), which counts as quiet."""
    from decoevo.lm.errors import RequestTimeout

    async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, n: int) -> None:
        while (request := await read_request(reader)) is not None:
            if b'"first"' in request[1]:
                await answer(writer, chat_reply("ok"))
            # the second is never answered

    async with serving(handler) as (origin, _):
        backend = backend_for(origin, first_byte_timeout_s=0.5, max_concurrency=2)
        first = asyncio.ensure_future(backend.complete(ask("first")))
        await asyncio.sleep(0)  # the first request's clock starts before the second's: it is ahead of it
        second = asyncio.ensure_future(backend.complete(ask("second")))
        assert (await first).text == "ok"
        with pytest.raises(RequestTimeout) as caught:
            await second
        await backend.aclose()
    assert caught.value.which == "first_byte" and caught.value.quiet
