"""How long to wait for one request, sized to what it asks for.

A non-streamed completion sends its first byte only when generation is done, so the first-byte limit
must cover generating `max_tokens` at the slowest speed we accept, plus a fixed allowance for queueing
and the prompt. A fixed 120 s limit was both too long for a hung server (6 attempts: 12 minutes) and
too short for a long answer from a slow one."""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelSpec

#: seconds allowed before generation starts (queueing, prompt processing)
FIRST_BYTE_ALLOWANCE_S = 20.0
#: seconds allowed to receive the body once it has started
TRANSFER_ALLOWANCE_S = 15.0


@dataclass(frozen=True)
class Timeouts:
    connect_s: float
    first_byte_s: float
    total_s: float

    def describe(self, which: str) -> str:
        value = {"connect": self.connect_s, "first_byte": self.first_byte_s, "total": self.total_s}[which]
        return f"{which.replace('_', '-')} timeout ({value:.1f}s)"


def request_timeouts(spec: ModelSpec, max_tokens: int) -> Timeouts:
    """The three limits for a request of `max_tokens`; explicit settings in `spec` win."""
    first_byte = spec.first_byte_timeout_s or FIRST_BYTE_ALLOWANCE_S + max_tokens / spec.min_tokens_per_s
    total = spec.timeout_s or first_byte + TRANSFER_ALLOWANCE_S
    return Timeouts(connect_s=min(spec.connect_timeout_s, total), first_byte_s=min(first_byte, total),
                    total_s=total)
