"""Staying under a provider's rate limits: requests/minute and tokens/minute buckets, and a concurrency
limit that adapts to 429s (additive increase, multiplicative decrease) and to the rate-limit headers.

A fixed concurrency against a real provider either wastes its quota or meets 429s on every burst; each
429 costs a retry and a backoff. The limiter admits a request when a concurrency slot is free and both
buckets hold enough; it halves the concurrency on a 429 from a request admitted after the last cut (the
429s of requests sent before it say nothing about the new limit: TCP's rule of one cut per round trip),
grows it by one per window of successes, and pauses new requests for as long as the server's
Retry-After or an exhausted x-ratelimit-remaining-* header says.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass

_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_duration(value: str | None) -> float | None:
    """Seconds from a reset header: OpenAI's "1s", "6m0s", "20ms", or plain seconds."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    parts = _DURATION.findall(value.strip())
    if not parts:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _int(value: str | None) -> int | None:
    try:
        return int(float(value)) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True)
class RateInfo:
    """What a reply's x-ratelimit-* headers said (OpenAI's names, which vLLM-style proxies copy)."""

    remaining_requests: int | None = None
    remaining_tokens: int | None = None
    reset_requests_s: float | None = None
    reset_tokens_s: float | None = None

    @classmethod
    def from_headers(cls, headers: Mapping[str, str]) -> RateInfo | None:
        requests, tokens = headers.get("x-ratelimit-remaining-requests"), headers.get("x-ratelimit-remaining-tokens")
        if requests is None and tokens is None:
            return None  # most local servers send none: the common case costs two lookups
        return cls(_int(requests), _int(tokens), parse_duration(headers.get("x-ratelimit-reset-requests")),
                   parse_duration(headers.get("x-ratelimit-reset-tokens")))


class TokenBucket:
    """`per_minute` units a minute, refilled continuously, holding at most one second's worth (at least
    one request's): a provider's per-minute limit is usually also enforced over shorter windows."""

    def __init__(self, per_minute: float, clock: Callable[[], float]) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self._clock = clock
        self._at = clock()

    def _refill(self) -> None:
        now = self._clock()
        self.level = min(self.capacity, self.level + (now - self._at) * self.rate)
        self._at = now

    def wait_s(self, amount: float) -> float:
        """0 when `amount` may be taken now (an amount above capacity needs a full bucket), else seconds."""
        self._refill()
        need = min(amount, self.capacity)
        return 0.0 if self.level >= need else (need - self.level) / self.rate

    def take(self, amount: float) -> None:
        self._refill()
        self.level -= amount  # may go negative: a large request is paid back before the next one

    def give(self, amount: float) -> None:
        self._refill()
        self.level = min(self.capacity, self.level + amount)


class AdaptiveLimiter:
    """Admission for one model. `acquire(tokens)` before a request, `release(...)` after it."""

    def __init__(self, max_concurrency: int, requests_per_minute: float | None = None,
                 tokens_per_minute: float | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_concurrency = max(1, max_concurrency)
        self.limit = float(self.max_concurrency)
        self.in_flight = 0
        self.paused_until = 0.0
        self.cuts = 0
        self.lowest = self.max_concurrency  # the lowest concurrency a cut has set
        self.last_timeout_at = -math.inf  # when a request last timed out at a busy server
        self._clock = clock
        self._requests = TokenBucket(requests_per_minute, clock) if requests_per_minute else None
        self._tokens = TokenBucket(tokens_per_minute, clock) if tokens_per_minute else None
        self._last_cut = -math.inf
        self._admitted_at = 0.0
        self._woken = 0  # waiters given a slot that have not yet taken it
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def concurrency(self) -> int:
        return max(1, int(self.limit))

    def _delay(self, tokens: int) -> float | None:
        """None: admitted (and charged). Otherwise seconds to wait, or inf to wait for a free slot."""
        # Slots promised to woken waiters that have not run yet are taken: a newcomer must not steal them.
        if self.in_flight + self._woken >= self.concurrency:
            return math.inf
        self._admitted_at = now = self._clock()
        wait = self.paused_until - now
        if self._requests is not None:
            wait = max(wait, self._requests.wait_s(1))
        if self._tokens is not None:
            wait = max(wait, self._tokens.wait_s(tokens))
        if wait > 0:
            return wait
        self.in_flight += 1
        if self._requests is not None:
            self._requests.take(1)
        if self._tokens is not None:
            self._tokens.take(tokens)
        return None

    async def acquire(self, tokens: int = 0) -> float:
        """Wait until the request may go; returns its admission time, which `release` takes back."""
        while (delay := self._delay(tokens)) is not None:
            if delay == math.inf:
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                except asyncio.CancelledError:
                    if waiter.done() and not waiter.cancelled():  # woken for a slot it will not use
                        self._woken -= 1
                        self._wake()
                    elif waiter in self._waiters:
                        self._waiters.remove(waiter)
                    raise
                self._woken -= 1
            else:
                await asyncio.sleep(delay)
        return self._admitted_at

    def busy(self, window_s: float) -> bool:
        """Whether a request that just timed out (and is still counted in flight) met a busy server: other
        requests were in flight with it, or another request timed out at a busy server within the last
        `window_s` (the server may still be generating the requests given up on then). A hung server looks
        the same; the client's bound on such retries (`client.MAX_BUSY_TIMEOUTS`) still leaves it."""
        return self.in_flight > 1 or self._clock() - self.last_timeout_at < window_s

    def release(self, *, tokens_reserved: int = 0, tokens_used: int | None = None, throttled: bool = False,
                retry_after: float | None = None, rate: RateInfo | None = None, admitted_at: float = math.inf,
                busy: bool = False) -> None:
        """After a request: give back the slot, correct the token bucket by what was actually used, and
        adapt to what the server said. `busy`: a timeout at a busy server (`busy()`); the cut halves the
        requests actually in flight, not a limit far above them (64 allowed, 6 sent: 3, not 32)."""
        sent = self.in_flight
        self.in_flight -= 1
        now = self._clock()
        if busy:
            self.last_timeout_at = now
        if self._tokens is not None and tokens_used is not None:
            self._tokens.give(tokens_reserved - tokens_used)
        if throttled:
            if self._cuts_on(admitted_at):
                self.limit = max(1.0, (min(self.limit, sent) if busy else self.limit) / 2)
                self._last_cut = now
                self.cuts += 1
                self.lowest = min(self.lowest, self.concurrency)
            if retry_after:
                self.paused_until = max(self.paused_until, now + retry_after)
        elif tokens_used is not None:  # a success: one more slot per window of `limit` successes
            self.limit = min(float(self.max_concurrency), self.limit + 1.0 / self.limit)
        if rate is not None:
            if rate.remaining_requests == 0 and rate.reset_requests_s:
                self.paused_until = max(self.paused_until, now + rate.reset_requests_s)
            if rate.remaining_tokens == 0 and rate.reset_tokens_s:
                self.paused_until = max(self.paused_until, now + rate.reset_tokens_s)
        self._wake()

    def _cuts_on(self, admitted_at: float) -> bool:
        return admitted_at > self._last_cut

    def _wake(self) -> None:
        free = self.concurrency - self.in_flight - self._woken
        while free > 0 and self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._woken += 1
                free -= 1


def estimate_tokens(prompt_chars: int, max_tokens: int) -> int:
    """What a provider charges a request against its tokens/minute before it runs (about 4 characters a
    token for the prompt, plus the full completion allowance)."""
    return prompt_chars // 4 + max_tokens
