"""The optional LiteLLM backend against a fake OpenAI-wire server on 127.0.0.1 (LiteLLM's `openai/`
provider with an api_base): our cache, ledger, retries, parsing and redaction around its call."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from decoevo.lm import LM, InfrastructureError, LMConfig, Message, ModelSpec
from decoevo.lm.errors import EmptyReplyError
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app

pytest.importorskip("litellm")
pytest.importorskip("uvicorn")
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly:UserWarning")  # LiteLLM's own typing

KEY = "sk-litellm-test-0123456789abcdef"


class Answer(BaseModel):
    answer: str


@pytest.fixture
async def litellm_lm(monkeypatch, cache):
    monkeypatch.setenv("DECOEVO_TEST_KEY", KEY)
    made: list[LM] = []

    def make(url: str, **kwargs) -> LM:
        spec = ModelSpec(backend="litellm", model="openai/fake", base_url=f"{url}/v1", api_key_env="DECOEVO_TEST_KEY",
                         backoff_base_s=0.01, **kwargs)
        made.append(LM(LMConfig(models={"default": spec}), cache=cache))
        return made[-1]

    yield make
    for lm in made:
        await lm.aclose()


async def test_plain_and_structured_calls_are_cached_and_counted(litellm_lm):
    server = FakeOpenAI(lambda body, n: Reply(content='{"answer": "42"}'))
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        first = await lm.complete([Message("user", "q")], role="judge", schema=Answer)
        again = await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert first.value == again.value == Answer(answer="42") and again.cached
    assert len(server.requests) == 1
    assert server.requests[0]["response_format"]["type"] == "json_schema"
    row = lm.ledger.rows[("judge", "default")]
    assert (row.calls, row.cache_hits) == (1, 1) and row.prompt_tokens > 0


async def test_our_retries_not_litellms_handle_a_429(litellm_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=429, headers={"Retry-After": "0"}) if n == 0
                        else Reply(content="ok"))
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        result = await lm.complete([Message("user", "q")], role="solve")
    assert result.text == "ok" and len(server.requests) == 2
    assert lm.ledger.total().retries == 1


async def test_no_content_is_an_empty_reply_failure(litellm_lm):
    server = FakeOpenAI(lambda body, n: Reply(content=None, finish_reason="length"))
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        with pytest.raises(EmptyReplyError, match="raise max_tokens"):
            await lm.complete([Message("user", "q")], role="solve")


async def test_a_refused_key_says_how_to_fix_it_and_never_shows_the_key(litellm_lm):
    server = FakeOpenAI(lambda body, n: Reply(status=401, error_message=f"bad key {KEY}"))
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        with pytest.raises(InfrastructureError) as info:
            await lm.complete([Message("user", "q")], role="solve")
    text = f"{info.value} {info.value!r}"
    assert "HTTP 401" in text and "Check the API key" in text and KEY not in text
    assert len(server.requests) == 1


async def test_a_server_that_refuses_json_schema_gets_the_schema_in_the_prompt(litellm_lm):
    def respond(body, n):
        if "response_format" in body:
            return Reply(status=400, error_message="response_format is not supported")
        return Reply(content='{"answer": "plain"}')

    server = FakeOpenAI(respond)
    with serve_app(server.app()) as url:
        lm = litellm_lm(url)
        result = await lm.complete([Message("user", "q")], role="judge", schema=Answer)
    assert result.value == Answer(answer="plain")
    assert "JSON schema" in server.requests[-1]["messages"][0]["content"]
