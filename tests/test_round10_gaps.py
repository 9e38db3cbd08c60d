"""Gaps the mutation bench found in modules touched by round ten (issue 47.1; docs/reliability.md "Round ten"):
each test fails on the surviving mutant named in its docstring."""

from __future__ import annotations

from pathlib import Path

import pytest

from decoevo import redact
from decoevo.lm.config import ModelSpec
from decoevo.lm.errors import InfrastructureError, RetryableError
from decoevo.lm.openai_backend import OpenAIBackend, Reply
from decoevo.lm.types import BackendRequest, GenParams, Message
from decoevo.rundir.files import RunReadError, read_yaml


def _backend() -> OpenAIBackend:
    return OpenAIBackend(ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1"))


def test_with_no_secret_known_a_reply_body_is_the_very_object(monkeypatch: pytest.MonkeyPatch) -> None:
    """Mutant: `_tree_holds_any` answering True when no secret is known (every body copied string by string)."""
    monkeypatch.setattr(redact, "_known", ())

    def walked(*_: object) -> None:
        raise AssertionError("a body was walked with no secret to look for")

    monkeypatch.setattr(redact, "_mask_tree", walked)
    body = {"choices": [{"message": {"content": "an answer"}}]}
    assert redact.mask_tree(body) is body


def test_a_reply_whose_choice_list_is_empty_is_a_retryable_fault_that_may_be_billed() -> None:
    """Mutant: the empty-choices check removed (an IndexError escaped every category)."""
    request = BackendRequest(model="m", messages=(Message("user", "q"),), params=GenParams())
    with pytest.raises(RetryableError) as caught:
        _backend()._decoded(b'{"id": "x", "choices": []}', request)
    assert caught.value.may_be_billed


def test_a_429_is_a_throttle_and_a_quota_429_is_not_retried() -> None:
    """Mutant: a 429 not marked `throttled` (the limiter would not slow down for an overloaded server)."""
    backend = _backend()
    slow = backend._status_error(Reply(429, b'{"error": {"message": "slow down"}}', 0.5, None))
    assert isinstance(slow, RetryableError) and slow.throttled and slow.retry_after == 0.5
    quota = backend._status_error(Reply(429, b'{"error": {"message": "You exceeded your current quota"}}', None, None))
    assert isinstance(quota, InfrastructureError) and not isinstance(quota, RetryableError)


def test_a_run_file_that_is_not_yaml_is_named_not_read_as_nothing(tmp_path: Path) -> None:
    """Mutant: `read_yaml` passing over a YAML error (a damaged config.yaml read as an empty one)."""
    path = tmp_path / "config.yaml"
    path.write_text("method: [decoevo\nseeds: {1, 2\n", encoding="utf-8")
    with pytest.raises(RunReadError, match=r"config\.yaml: not valid YAML"):
        read_yaml(path)
