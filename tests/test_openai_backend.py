"""The openai backend against a real HTTP server on 127.0.0.1 with scripted behaviour."""

from __future__ import annotations

import json

import pytest
from pydantic import BaseModel

from decoevo.lm import LM, InfrastructureError, LMConfig, Message, ModelSpec, ParseError
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app

pytest.importorskip("uvicorn")


class Answer(BaseModel):
    answer: str


def new_lm(base_url: str, cache, **spec_kwargs) -> LM:
    spec = ModelSpec(backend="openai", model="fake", base_url=f"{base_url}/v1", backoff_base_s=0.01, **spec_kwargs)
    return LM(LMConfig(models={"default": spec}), cache=cache)


@pytest.fixture
async def http_lm():
    """`new_lm`, closed after the test (an HTTP backend's connections belong to the test's event loop)."""
    made: list[LM] = []

    def make(base_url: str, cache, **spec_kwargs) -> LM:
        made.append(new_lm(base_url, cache, **spec_kwargs))
        return made[-1]

    yield make
    for lm in made:
        await lm.aclose()


async def test_429_with_retry_after_then_200(cache, http_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=429, headers={"Retry-After": "0.2"}) if n == 0
                        else Reply(content='{"answer": "42"}'))
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache)
        result = await lm.complete([Message("user", "q")], role="solve", schema=Answer)
        await lm.aclose()
    assert result.value == Answer(answer="42")
    assert len(server.requests) == 2
    row = lm.ledger.rows[("solve", "default")]
    assert (row.calls, row.retries, row.failures["infrastructure"]) == (1, 1, 0)
    assert result.latency_s >= 0.2  # waited as the server asked


async def test_json_schema_response_format_is_sent(cache, http_lm):
    server = FakeOpenAI(lambda body, n: Reply(content='{"answer": "x"}'))
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache)
        await lm.complete([Message("user", "q")], role="solve", schema=Answer)
        lm2 = http_lm(url, None, structured_output="json_object")
        lm2.cache = None
        await lm2.complete([Message("user", "q")], role="solve", schema=Answer)
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == ["answer"]
    assert server.requests[1]["response_format"]["type"] == "json_object"


async def test_persistent_5xx_gives_up_with_a_category(cache, http_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=503))
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache, max_retries=2)
        with pytest.raises(InfrastructureError, match="gave up after 2 retries"):
            await lm.complete([Message("user", "q")], role="judge")
    assert len(server.requests) == 3
    assert lm.ledger.rows[("judge", "default")].failures["infrastructure"] == 1


async def test_wrong_model_name_is_a_clear_non_retried_error(cache, http_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=404))
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache)
        with pytest.raises(InfrastructureError, match="model name 'fake'"):
            await lm.complete([Message("user", "q")], role="solve")
    assert len(server.requests) == 1


async def test_truncated_body_is_retried(cache, http_lm):
    good = json.dumps({"answer": "ok"})
    server = FakeOpenAI(lambda body, n: Reply(raw_body='{"id": "x", "choi') if n == 0 else Reply(content=good))
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache)
        result = await lm.complete([Message("user", "q")], role="solve", schema=Answer)
    assert result.value == Answer(answer="ok") and len(server.requests) == 2


async def test_schema_violating_output_is_repaired_or_fails_closed(cache, http_lm):
    server = FakeOpenAI(lambda body, n: Reply(content='{"answr": "typo"}'))
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache)
        with pytest.raises(ParseError):
            await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert len(server.requests) == 3


async def test_unreachable_server_is_an_infrastructure_error(cache, http_lm):
    from decoevo.testing.server import free_port

    lm = http_lm(f"http://127.0.0.1:{free_port()}", cache, max_retries=1)
    with pytest.raises(InfrastructureError, match="cannot connect"):
        await lm.complete([Message("user", "q")], role="solve")


async def test_concurrency_is_bounded_per_backend(cache, http_lm):
    import asyncio

    server = FakeOpenAI(lambda body, n: Reply(content="ok", delay_s=0.05))
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache, max_concurrency=4)
        await asyncio.gather(*[lm.complete([Message("user", f"q{i}")], role="solve") for i in range(20)])
    assert server.max_in_flight <= 4 and len(server.requests) == 20


class ClientLog:
    """ASGI wrapper that records each request's client address and headers."""

    def __init__(self, app) -> None:
        self.app = app
        self.peers: list[tuple[str, int]] = []
        self.headers: list[dict[bytes, bytes]] = []

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "http":
            self.peers.append(tuple(scope["client"]))
            self.headers.append(dict(scope["headers"]))
        await self.app(scope, receive, send)


async def test_requests_reuse_a_pool_of_keep_alive_connections(cache, http_lm, monkeypatch):
    monkeypatch.setenv("DECOEVO_TEST_KEY", "sk-test-pool")
    import asyncio

    server = FakeOpenAI(lambda body, n: Reply(content="ok", delay_s=0.02))
    log = ClientLog(server.app())
    with serve_app(log) as url:
        lm = http_lm(url, cache, max_concurrency=4, api_key_env="DECOEVO_TEST_KEY")
        for wave in range(3):
            await asyncio.gather(*[lm.complete([Message("user", f"q{wave}-{i}")], role="solve") for i in range(8)])
    assert len(log.peers) == 24 and len(set(log.peers)) <= 4  # 24 requests over at most 4 connections
    sent = log.headers[0]
    assert sent[b"authorization"] == b"Bearer sk-test-pool" and sent[b"content-type"] == b"application/json"
    body = server.requests[0]
    assert body["model"] == "fake" and body["messages"] == [{"role": "user", "content": "q0-0"}]
    assert {"temperature", "max_tokens", "seed"} <= body.keys() and "response_format" not in body


async def test_client_error_carries_the_servers_explanation(cache, http_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=400))  # body {"error": {"message": "scripted 400", ...}}
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache)
        with pytest.raises(InfrastructureError, match=r"HTTP 400 from .*: scripted 400"):
            await lm.complete([Message("user", "q")], role="solve")
    assert len(server.requests) == 1  # a 4xx other than 408/409/429 is not retried
    assert lm.ledger.rows[("solve", "default")].failures["infrastructure"] == 1


async def test_slow_server_times_out_as_a_retryable_fault(cache, http_lm):
    server = FakeOpenAI(lambda body, n: Reply(content="late", delay_s=2.0) if n == 0 else Reply(content="ok"))
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache, timeout_s=0.3, max_retries=1)
        result = await lm.complete([Message("user", "q")], role="solve")
    assert result.text == "ok" and len(server.requests) == 2
    assert lm.ledger.rows[("solve", "default")].retries == 1


async def test_connection_closed_mid_body_is_retried(cache, http_lm):
    """A server that promises more bytes than it sends, then hangs up: a transport fault, retried."""
    import asyncio

    from decoevo.testing.fake_openai import chat_body

    seen = 0

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal seen
        head = await reader.readuntil(b"\r\n\r\n")
        lines = head.lower().split(b"\r\n")
        length = int(next(line.split(b":")[1] for line in lines if line.startswith(b"content-length")))
        await reader.readexactly(length)
        seen += 1
        body = chat_body('{"answer": "ok"}', "fake").encode()
        sent = body[: len(body) // 2] if seen == 1 else body
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(body)
                     + sent)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        lm = http_lm(f"http://127.0.0.1:{port}", cache, max_retries=1)
        result = await lm.complete([Message("user", "q")], role="solve", schema=Answer)
    finally:
        server.close()
    assert result.value == Answer(answer="ok") and seen == 2
    assert lm.ledger.rows[("solve", "default")].retries == 1


async def test_pooled_connection_after_a_timeout_or_truncation_carries_only_its_own_reply(cache, http_lm):
    """After a client timeout (the server answers later, on a connection the client gave up) and after a
    truncated body, the pool's next requests each get their own reply, never a stale one."""
    def respond(body, n):
        text = body["messages"][-1]["content"]
        if n == 0:
            return Reply(content=f"late {text}", delay_s=0.6)
        if n == 1:
            return Reply(raw_body='{"id": "x", "choi')
        return Reply(content=f"echo {text}")

    server = FakeOpenAI(respond)
    with serve_app(server.app()) as url:
        lm = http_lm(url, cache, timeout_s=0.3, max_retries=3, max_concurrency=1)
        first = await lm.complete([Message("user", "a")], role="solve")
        rest = [await lm.complete([Message("user", q)], role="solve") for q in ("b", "c", "d")]
    assert [r.text for r in (first, *rest)] == ["echo a", "echo b", "echo c", "echo d"]
    assert lm.ledger.rows[("solve", "default")].retries == 2  # the timeout and the truncated body


@pytest.mark.filterwarnings("ignore:Unclosed:ResourceWarning")  # the first two loops end without lm.aclose()
def test_one_lm_serves_successive_event_loops(cache):
    """Each asyncio.run gets its own connection pool; a pool from a finished loop is not reused."""
    import asyncio

    server = FakeOpenAI(lambda body, n: Reply(content=f"answer {n}"))
    with serve_app(server.app()) as url:
        lm = new_lm(url, cache)
        first = asyncio.run(lm.complete([Message("user", "one")], role="solve"))
        second = asyncio.run(lm.complete([Message("user", "two")], role="solve"))

        async def close() -> bool:
            async with lm:
                await lm.complete([Message("user", "three")], role="solve")
            backend = lm.backend("default")
            return backend._session is None

        closed = asyncio.run(close())
    assert (first.text, second.text) == ("answer 0", "answer 1") and closed and len(server.requests) == 3


def test_proxy_comes_from_the_environment_once(monkeypatch):
    from decoevo.lm.openai_backend import env_proxy

    monkeypatch.setenv("http_proxy", "http://proxy.invalid:3128")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    for name in ("HTTP_PROXY", "NO_PROXY", "https_proxy", "HTTPS_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert env_proxy("http://127.0.0.1:8000/v1/chat/completions") is None
    assert env_proxy("http://models.invalid/v1/chat/completions") == "http://proxy.invalid:3128"
    assert env_proxy("https://models.invalid/v1/chat/completions") is None
