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


def make_lm(base_url: str, cache, **spec_kwargs) -> LM:
    spec = ModelSpec(backend="openai", model="fake", base_url=f"{base_url}/v1", backoff_base_s=0.01, **spec_kwargs)
    return LM(LMConfig(models={"default": spec}), cache=cache)


async def test_429_with_retry_after_then_200(cache):
    server = FakeOpenAI(lambda body, n: Reply(status=429, headers={"Retry-After": "0.2"}) if n == 0
                        else Reply(content='{"answer": "42"}'))
    with serve_app(server.app()) as url:
        lm = make_lm(url, cache)
        result = await lm.complete([Message("user", "q")], role="solve", schema=Answer)
        await lm.aclose()
    assert result.value == Answer(answer="42")
    assert len(server.requests) == 2
    row = lm.ledger.rows[("solve", "default")]
    assert (row.calls, row.retries, row.failures["infrastructure"]) == (1, 1, 0)
    assert result.latency_s >= 0.2  # waited as the server asked


async def test_json_schema_response_format_is_sent(cache):
    server = FakeOpenAI(lambda body, n: Reply(content='{"answer": "x"}'))
    with serve_app(server.app()) as url:
        lm = make_lm(url, cache)
        await lm.complete([Message("user", "q")], role="solve", schema=Answer)
        lm2 = make_lm(url, None, structured_output="json_object")
        lm2.cache = None
        await lm2.complete([Message("user", "q")], role="solve", schema=Answer)
    fmt = server.requests[0]["response_format"]
    assert fmt["type"] == "json_schema" and fmt["json_schema"]["schema"]["required"] == ["answer"]
    assert server.requests[1]["response_format"]["type"] == "json_object"


async def test_persistent_5xx_gives_up_with_a_category(cache):
    server = FakeOpenAI(lambda body, n: Reply(status=503))
    with serve_app(server.app()) as url:
        lm = make_lm(url, cache, max_retries=2)
        with pytest.raises(InfrastructureError, match="gave up after 2 retries"):
            await lm.complete([Message("user", "q")], role="judge")
    assert len(server.requests) == 3
    assert lm.ledger.rows[("judge", "default")].failures["infrastructure"] == 1


async def test_wrong_model_name_is_a_clear_non_retried_error(cache):
    server = FakeOpenAI(lambda body, n: Reply(status=404))
    with serve_app(server.app()) as url:
        lm = make_lm(url, cache)
        with pytest.raises(InfrastructureError, match="model name 'fake'"):
            await lm.complete([Message("user", "q")], role="solve")
    assert len(server.requests) == 1


async def test_truncated_body_is_retried(cache):
    good = json.dumps({"answer": "ok"})
    server = FakeOpenAI(lambda body, n: Reply(raw_body='{"id": "x", "choi') if n == 0 else Reply(content=good))
    with serve_app(server.app()) as url:
        lm = make_lm(url, cache)
        result = await lm.complete([Message("user", "q")], role="solve", schema=Answer)
    assert result.value == Answer(answer="ok") and len(server.requests) == 2


async def test_schema_violating_output_is_repaired_or_fails_closed(cache):
    server = FakeOpenAI(lambda body, n: Reply(content='{"answr": "typo"}'))
    with serve_app(server.app()) as url:
        lm = make_lm(url, cache)
        with pytest.raises(ParseError):
            await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert len(server.requests) == 3


async def test_unreachable_server_is_an_infrastructure_error(cache):
    from decoevo.testing.server import free_port

    lm = make_lm(f"http://127.0.0.1:{free_port()}", cache, max_retries=1)
    with pytest.raises(InfrastructureError, match="cannot connect"):
        await lm.complete([Message("user", "q")], role="solve")


async def test_concurrency_is_bounded_per_backend(cache):
    import asyncio

    server = FakeOpenAI(lambda body, n: Reply(content="ok", delay_s=0.05))
    with serve_app(server.app()) as url:
        lm = make_lm(url, cache, max_concurrency=4)
        await asyncio.gather(*[lm.complete([Message("user", f"q{i}")], role="solve") for i in range(20)])
    assert server.max_in_flight <= 4 and len(server.requests) == 20
