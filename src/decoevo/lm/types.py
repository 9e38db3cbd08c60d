"""Requests and results of the one model interface every role uses."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from .backend_secrets import mask_fields
from .ratelimit import RateInfo

Role = Literal["system", "user", "assistant"]


@dataclass(frozen=True)
class Message:
    role: Role
    content: str

    def as_dict(self) -> dict[str, str]:
        return {"role": self.role, "content": self.content}


@dataclass(frozen=True)
class GenParams:
    """Sampling parameters. `sample_index` makes the L rollouts of one prompt distinct, reproducible
    requests: it is part of the cache key and is mixed into the seed sent to the backend."""

    temperature: float = 0.0
    max_tokens: int = 512
    seed: int = 0
    sample_index: int = 0
    # Nucleus-style floor some benchmarks sample with (EQ-Bench CW: 0.1); None = the backend's default.
    min_p: float | None = None
    # The reply's content as the server sent it, a leading reasoning block included: for an official scorer
    # that reads the whole content (LLMEval-Med's Evaluate.py takes the first bracket of it, even one inside
    # `<think>`). Every other caller gets the answer alone (lm/reply.py).
    whole_content: bool = False

    def effective_seed(self) -> int:
        # Knuth's multiplicative constant spreads consecutive indices; stays within 31 bits.
        return (self.seed * 1_000_003 + self.sample_index * 2_654_435_761) % (2**31 - 1)


@dataclass(frozen=True)
class BackendRequest:
    """What a backend receives: fully resolved, no role routing, no cache logic."""

    model: str
    messages: tuple[Message, ...]
    params: GenParams
    json_schema: dict[str, Any] | None = None


@dataclass(frozen=True)
class Completion:
    """What a backend returns for one request."""

    text: str  # the answer only: reasoning text is removed by the backend (lm/reply.py)
    prompt_tokens: int
    completion_tokens: int
    finish_reason: str = "stop"
    refusal: str | None = None
    reasoning_chars: int = 0  # characters of reasoning the reply carried (stripped from `text`)
    reasoning_tokens: int = 0  # of completion_tokens, those the server reports as reasoning
    rate: RateInfo | None = field(default=None, compare=False)  # the reply's rate-limit headers; not cached
    request_id: str | None = field(default=None, compare=False)  # its write-ahead record (lm/journal.py)

    @property
    def truncated(self) -> bool:
        """The reply was cut by max_tokens: the answer may be incomplete."""
        return self.finish_reason == "length"


@dataclass(frozen=True)
class CallResult:
    """What the LM interface returns: the text, the validated object when a schema was given, and
    how it was obtained (cache hits cost nothing)."""

    text: str
    value: Any = None
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    attempts: int = 1
    extra: dict[str, Any] = field(default_factory=dict)
    finish_reason: str = "stop"  # of the answer returned: "length" means it hit max_tokens
    truncated: bool = False  # the answer was cut by max_tokens
    reasoning_tokens: int = 0  # paid reasoning tokens (not in `text`)


@dataclass(frozen=True)
class CallRecord:
    """One answered request, as seen by `on_call` observers (the run directory's call log)."""

    role: str
    model: str
    key: str
    cached: bool
    prompt_tokens: int
    completion_tokens: int
    # What was asked and answered, for the run's transcript (a run is readable without the shared cache).
    request: BackendRequest | None = field(default=None, repr=False, compare=False)
    reply: str | None = field(default=None, repr=False, compare=False)
    truncated: bool = False  # the reply was cut by max_tokens (cache hits included)
    reasoning_tokens: int = 0  # paid reasoning tokens (0 for hits)
    cost_usd: float | None = None  # what the paid call cost; None for a hit or a model with no price
    request_id: str | None = None  # the write-ahead record this paid call completes (lm/journal.py)
    estimated: bool = False  # sent but never answered: billed at the upper bound of its tokens


MAX_USAGE_TOKENS = 10**9  # one reply's count above this is a broken server, not a long answer


def usage_count(usage: Any, name: str) -> int:
    """A token count from a server's `usage` object: absent is 0; anything but a non-negative whole
    number up to MAX_USAGE_TOKENS is a ValueError (a negative, NaN or infinite count would let spend
    bypass --max-tokens or poison the ledger)."""
    value = usage.get(name) if isinstance(usage, dict) else None
    if value is None:
        return 0
    if (isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value)
            or value != int(value) or not 0 <= value <= MAX_USAGE_TOKENS):
        raise ValueError(f"usage.{name} is {value!r}; expected a whole number of tokens from 0 to "
                         f"{MAX_USAGE_TOKENS:,}")
    return int(value)


def checked_completion(completion: Completion) -> Completion:
    """What any backend returned, before it reaches the ledger, the budget and the cache: the counts
    must be valid (a ValueError otherwise); every secret this process holds is masked in each text field
    (whichever backend answered); lone UTF-16 surrogates in the text (invalid Unicode that a JSON reply
    can carry as `\\ud800`) become U+FFFD, as a decoder would make them."""
    for name in ("prompt_tokens", "completion_tokens"):
        usage_count({name: getattr(completion, name)}, name)
    completion = mask_fields(completion)
    try:
        completion.text.encode("utf-8")
    except UnicodeEncodeError:
        text = completion.text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return replace(completion, text=text)
    return completion
