"""Retry policy for transient backend faults: exponential backoff with full jitter, a cap, and
the server's Retry-After honoured. Pure, so it is unit-tested without sleeping."""

from __future__ import annotations

import random
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 5
    base_s: float = 0.5
    cap_s: float = 30.0

    def delay(self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number `attempt` (1-based)."""
        if retry_after is not None and retry_after >= 0:
            # The server knows its own load; never wait less than it asked, never more than the cap.
            return min(retry_after, self.cap_s)
        ceiling = min(self.cap_s, self.base_s * (2 ** (attempt - 1)))
        return (rng or random).uniform(0.0, ceiling)

    def should_retry(self, attempt: int) -> bool:
        return attempt <= self.max_retries


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header (delta-seconds form; HTTP-dates are rare for LLM servers)."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from datetime import UTC, datetime
        from email.utils import parsedate_to_datetime

        try:
            when = parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
