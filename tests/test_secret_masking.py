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
