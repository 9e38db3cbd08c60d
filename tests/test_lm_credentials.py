"""Credentials: a refused or missing key is one clear, unretried error naming what to set, for the openai
and the LiteLLM backend, on real servers on 127.0.0.1; a server on this machine needs no key at all."""

from __future__ import annotations

import pytest

from decoevo.lm import LM, CredentialError, LMConfig, Message, ModelSpec
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app

pytest.importorskip("uvicorn")
pytestmark = pytest.mark.filterwarnings("ignore:Items? .*ReadOnly:UserWarning")  # LiteLLM's own typing
KEY = "sk-credentials-test-0123456789"


@pytest.fixture
async def lm_for(monkeypatch):
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DECOEVO_TEST_KEY"):
        monkeypatch.delenv(name, raising=False)
    made: list[LM] = []

    def make(**spec) -> LM:
        spec.setdefault("backoff_base_s", 0.01)
        made.append(LM(LMConfig(models={"default": ModelSpec(**spec)}, use_cache=False)))
        return made[-1]

    yield make
    for lm in made:
        await lm.aclose()


def refusing(status: int) -> FakeOpenAI:
    return FakeOpenAI(lambda body, n: Reply(status=status, error_message="Invalid API key"))


@pytest.mark.parametrize("status", [401, 403])
async def test_openai_backend_names_the_missing_variable_and_never_retries(lm_for, status):
    server = refusing(status)
    with serve_app(server.app()) as url:
        lm = lm_for(backend="openai", model="fake", base_url=f"{url}/v1")
        with pytest.raises(CredentialError, match=r"No API key was found: set \$OPENAI_API_KEY") as info:
            await lm.complete([Message("user", "q")], role="solve")
    assert f"credentials refused (HTTP {status})" in str(info.value)
    assert len(server.requests) == 1 and lm.ledger.total().retries == 0


async def test_openai_backend_names_the_variable_whose_key_was_refused(lm_for, monkeypatch):
    monkeypatch.setenv("DECOEVO_TEST_KEY", KEY)
    server = refusing(401)
    with serve_app(server.app()) as url:
        lm = lm_for(backend="openai", model="fake", base_url=f"{url}/v1", api_key_env="DECOEVO_TEST_KEY")
        with pytest.raises(CredentialError, match=r"Check the API key in \$DECOEVO_TEST_KEY") as info:
            await lm.complete([Message("user", "q")], role="solve")
    assert KEY not in f"{info.value} {info.value!r}" and len(server.requests) == 1


async def test_litellm_against_a_local_server_needs_no_key(lm_for):
    """Before: LiteLLM's openai provider refused to send without $OPENAI_API_KEY, which came back as an
    InternalServerError and was retried 5 times; the server never saw a request."""
    pytest.importorskip("litellm")
    server = FakeOpenAI(lambda body, n: Reply(content="hello"))
    with serve_app(server.app()) as url:
        lm = lm_for(backend="litellm", model="openai/fake", base_url=f"{url}/v1")
        result = await lm.complete([Message("user", "q")], role="solve")
    assert result.text == "hello" and len(server.requests) == 1 and lm.ledger.total().retries == 0


async def test_litellm_refused_key_is_a_credential_error_sent_once(lm_for, monkeypatch):
    pytest.importorskip("litellm")
    monkeypatch.setenv("DECOEVO_TEST_KEY", KEY)
    server = refusing(401)
    with serve_app(server.app()) as url:
        lm = lm_for(backend="litellm", model="openai/fake", base_url=f"{url}/v1", api_key_env="DECOEVO_TEST_KEY")
        with pytest.raises(CredentialError, match=r"Check the API key in \$DECOEVO_TEST_KEY") as info:
            await lm.complete([Message("user", "q")], role="solve")
    assert "HTTP 401" in str(info.value) and KEY not in f"{info.value} {info.value!r}"
    assert len(server.requests) == 1 and lm.ledger.total().retries == 0


async def test_litellm_provider_without_its_key_fails_before_any_request(lm_for):
    pytest.importorskip("litellm")
    lm = lm_for(backend="litellm", model="anthropic/claude-test")
    with pytest.raises(CredentialError, match=r"no API key for anthropic/claude-test: .*set \$ANTHROPIC_API_KEY"):
        await lm.complete([Message("user", "q")], role="solve")
    assert lm.ledger.total().retries == 0
