"""Which settings a run may change when it is resumed: the one classification used by the check of an
edited config.yaml and by `decoevo resume --set/--config`.

A resumed run continues the recorded one, so only settings that cannot change its results may differ:
how many requests run at once, timeouts and retries, request and token rates, tracking, the address and
key of the same model's server, and the data file's path (its content is checked on its own, by sha256
and the splits it gives). Anything else (steps, rollouts, a model, a budget, a prompt) would make one
run hold mixed settings.
"""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any

RESULT_NEUTRAL = (
    "hyper.concurrency",
    "lm.models.*.max_concurrency",
    "lm.models.*.n_threads",
    "lm.models.*.timeout_s",
    "lm.models.*.connect_timeout_s",
    "lm.models.*.first_byte_timeout_s",
    "lm.models.*.min_tokens_per_s",
    "lm.models.*.timeout_retries",
    "lm.models.*.max_retries",
    "lm.models.*.backoff_base_s",
    "lm.models.*.backoff_cap_s",
    "lm.models.*.requests_per_minute",
    "lm.models.*.tokens_per_minute",
    # where and with which key the same model is reached: a restarted server on another port, a rotated
    # key (the model's name stays result-changing; provenance.json records what the server says it is)
    "lm.models.*.base_url",
    "lm.models.*.api_key_env",
    "lm.models.*.api_key_file",
    "tracking",
    "tracking.*",
    "data.path",  # its content is the data check's (sha256 and splits, --accept-changed-data)
)
NEUTRAL_IN_WORDS = "concurrency, timeouts, retries, rates, tracking and a model's server address or key"


def result_neutral(key: str) -> bool:
    """Whether the dotted `key` may change when a run is resumed (a key under a neutral one too)."""
    parts = key.split(".")
    return any(
        fnmatchcase(".".join(parts[:n]), pattern) for pattern in RESULT_NEUTRAL for n in range(1, len(parts) + 1)
    )


def leaves(value: Any, prefix: str = "") -> dict[str, Any]:
    """A nested mapping as {dotted key: value}; an empty mapping inside it is a leaf of its own."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, sub in value.items():
            out |= leaves(sub, f"{prefix}.{key}" if prefix else str(key))
        return out
    return {prefix: value} if prefix else {}


class _Unset:
    def __repr__(self) -> str:
        return "unset"


_UNSET = _Unset()


def result_changes(recorded: dict[str, Any], now: dict[str, Any]) -> list[str]:
    """The result-changing keys whose value differs, each as `key (old -> new)`, sorted."""
    old, new = leaves(recorded), leaves(now)
    keys = old.keys() | new.keys()
    changed = []
    for k in sorted(keys):
        before, after = old.get(k, _UNSET), new.get(k, _UNSET)
        if before == after or result_neutral(k):
            continue
        if {} in (before, after) and any(other.startswith(k + ".") for other in keys):
            continue  # an empty mapping that gained or lost keys: those keys are named
        changed.append(f"{k} ({_short(before)} -> {_short(after)})")
    return changed


def _short(value: Any) -> str:
    text = " ".join(repr(value).split())
    return text if len(text) <= 40 else text[:37] + "..."
