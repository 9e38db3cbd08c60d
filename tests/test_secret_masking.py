"""decoevo.redact.mask_secrets with registered secrets of every length: a secret too short for the cut-copy
rule is still masked exactly, and a secret that contains another one is masked whole, not cut after the
shorter one (the registry keeps the longest first)."""

from __future__ import annotations

import secrets

from decoevo.redact import MASK, MIN_SECRET, PARTIAL, mask_secrets, register_secret


def _fresh(n: int) -> str:
    return secrets.token_hex(n)[:n]  # a value no other test registered


def test_a_secret_shorter_than_the_cut_copy_prefix_is_still_masked() -> None:
    short = _fresh(MIN_SECRET + 2)
    assert len(short) <= PARTIAL
    register_secret(short)
    assert mask_secrets(f"token={short} used") == f"token={MASK} used"


def test_a_secret_that_contains_another_is_masked_whole() -> None:
    inner = _fresh(MIN_SECRET + 2)  # shorter than PARTIAL: only its exact copies are masked
    outer = f"{inner}-{_fresh(20)}"
    register_secret(outer)
    register_secret(inner)  # registered later: the order of registration must not matter
    shown = mask_secrets(f"key {outer} and {inner}")
    assert shown == f"key {MASK} and {MASK}", shown


def test_a_reply_body_is_masked_in_every_string_and_returned_as_is_without_a_secret() -> None:
    """`mask_tree` scans a body's strings together once: a secret in a key, deep in a list, or cut short
    is still masked there; a body without one is the same object; a secret's halves in two strings are
    not a secret in either."""
    from decoevo.redact import mask_tree

    key = _fresh(30)
    register_secret(key)
    body = {"id": "x", "choices": [{"message": {"content": f"echo {key}!", key: 1}}, {"cut": f"a{key[:PARTIAL + 2]}"}]}
    masked = mask_tree(body)
    assert masked["choices"][0]["message"] == {"content": f"echo {MASK}!", MASK: 1}
    assert masked["choices"][1] == {"cut": f"a{MASK}"} and masked["id"] == "x"
    clean = {"id": "x", "choices": [{"message": {"content": "nothing secret"}}]}
    assert mask_tree(clean) is clean
    split = {"a": key[:10], "b": key[10:]}
    assert mask_tree(split) == split
    assert mask_tree(body, extra=[_fresh(20)])["choices"][0]["message"]["content"] == f"echo {MASK}!"


def test_a_completion_is_masked_in_every_text_field_at_once() -> None:
    from decoevo.lm.backend_secrets import mask_fields
    from decoevo.lm.types import Completion

    key, extra = _fresh(24), _fresh(24)
    register_secret(key)
    done = Completion(text=f"a {key}", prompt_tokens=1, completion_tokens=1, refusal=f"b {extra}")
    masked = mask_fields(done, [extra])
    assert (masked.text, masked.refusal, masked.finish_reason) == (f"a {MASK}", f"b {MASK}", "stop")
    clean = Completion(text="plain", prompt_tokens=1, completion_tokens=1)
    assert mask_fields(clean, [extra]) is clean
