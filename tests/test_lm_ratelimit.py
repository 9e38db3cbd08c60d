"""Rate limits: configured requests/tokens per minute, and adaptive concurrency that backs off on 429
and reads the rate-limit headers. Against a fake provider on 127.0.0.1 that enforces its limit."""

from __future__ import annotations

import asyncio

import pytest

from decoevo.lm import GenParams, Message
from decoevo.lm.ratelimit import AdaptiveLimiter, RateInfo, TokenBucket, parse_duration
from decoevo.testing.fake_openai import FakeOpenAI
from decoevo.testing.rate_limited import RateLimitedResponder
from decoevo.testing.server import serve_app

pytest.importorskip("uvicorn")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_durations_and_headers_are_read_as_openai_writes_them():
    assert parse_duration("6m0s") == 360 and parse_duration("20ms") == 0.02 and parse_duration("1.5s") == 1.5
    assert parse_duration("2") == 2 and parse_duration("soon") is None
    info = RateInfo.from_headers({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "1s",
                                  "x-ratelimit-remaining-tokens": "900", "x-ratelimit-reset-tokens": "6m0s"})
    assert info == RateInfo(0, 900, 1.0, 360.0)
    assert RateInfo.from_headers({"content-type": "application/json"}) is None


def test_token_bucket_holds_one_second_and_refills():
    clock = Clock()
    bucket = TokenBucket(120, clock)  # 2 a second
    assert bucket.capacity == 2 and bucket.wait_s(1) == 0
    bucket.take(2)
    assert bucket.wait_s(1) == pytest.approx(0.5)
    clock.now += 0.5
    assert bucket.wait_s(1) == 0


def test_aimd_halves_once_per_burst_of_429s_and_grows_back_by_one_per_window():
    clock = Clock()
    limiter = AdaptiveLimiter(16, clock=clock)
    sent = clock.now
    clock.now += 0.1
    for _ in range(5):  # one burst of 429s (all sent before the first cut) is one cut
        limiter.in_flight += 1
        limiter.release(throttled=True, admitted_at=sent)
    assert limiter.concurrency == 8 and limiter.cuts == 1
    clock.now += 0.1
    limiter.in_flight += 1
    limiter.release(throttled=True, retry_after=2.0, admitted_at=clock.now - 0.05)  # sent after the cut
    assert limiter.concurrency == 4 and limiter.paused_until == clock.now + 2.0
    for _ in range(5):  # about a window of `limit` successes adds one slot
        limiter.in_flight += 1
        limiter.release(tokens_used=10)
    assert limiter.concurrency == 5


def test_an_exhausted_remaining_header_pauses_new_requests_until_the_reset():
    clock = Clock()
    limiter = AdaptiveLimiter(4, clock=clock)
    limiter.in_flight += 1
    limiter.release(tokens_used=5, rate=RateInfo(remaining_requests=0, reset_requests_s=1.5))
    assert limiter.paused_until == clock.now + 1.5
    assert limiter._delay(1) == pytest.approx(1.5)


async def test_concurrency_waiters_are_woken_in_turn():
    limiter = AdaptiveLimiter(2)
    order: list[int] = []

    async def job(i: int) -> None:
        await limiter.acquire()
        order.append(i)
        await asyncio.sleep(0.01)
        limiter.release(tokens_used=1)

    await asyncio.gather(*(job(i) for i in range(6)))
    assert sorted(order) == list(range(6)) and limiter.in_flight == 0


def test_a_tokens_per_minute_limit_spaces_large_requests():
    clock = Clock()
    limiter = AdaptiveLimiter(8, tokens_per_minute=60_000, clock=clock)  # 1000 tokens a second
    assert limiter._delay(1000) is None
    assert limiter._delay(600) == pytest.approx(0.6)
    limiter.release(tokens_reserved=1000, tokens_used=400)  # 600 given back: room now
    assert limiter._delay(600) is None


async def _drive(url: str, openai_lm, n: int, **spec) -> tuple[list[str], object]:
    lm = openai_lm(url, None, backoff_base_s=0.05, backoff_cap_s=2.0, max_retries=20, **spec)
    results = await asyncio.gather(*(lm.complete([Message("user", f"q{i}")], role="solve",
                                                 params=GenParams(max_tokens=16)) for i in range(n)))
    return [r.text for r in results], lm


async def test_a_configured_request_rate_is_held_without_429s(openai_lm):
    provider = RateLimitedResponder(1200, delay_s=0.05)  # 20 a second
    server = FakeOpenAI(provider)
    with serve_app(server.app()) as url:
        texts, _ = await _drive(url, openai_lm, 50, max_concurrency=32, requests_per_minute=1140)
    assert texts == ["ok"] * 50  # nothing lost
    assert provider.throttled <= 2  # the limiter kept under the provider's limit
    assert provider.served_per_minute() > 0.85 * 1200


async def test_without_a_configured_rate_429s_cut_concurrency_and_every_request_completes(openai_lm):
    provider = RateLimitedResponder(1200, delay_s=0.1)
    server = FakeOpenAI(provider)
    with serve_app(server.app()) as url:
        texts, lm = await _drive(url, openai_lm, 60, max_concurrency=48)
    limiter = lm._limiters["default"]
    assert texts == ["ok"] * 60
    assert provider.throttled > 0 and limiter.cuts >= 1 and limiter.concurrency < 48
    assert lm.ledger.total().retries == provider.throttled and lm.ledger.total().failures["infrastructure"] == 0
    assert provider.served_per_minute() > 0.7 * 1200
