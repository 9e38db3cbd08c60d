"""Throughput against a provider that enforces a requests-per-minute limit (decoevo.testing.rate_limited:
a one-second bucket refilled continuously, 429 + Retry-After when empty, x-ratelimit-* headers on
every reply), for three client set-ups at the same max_concurrency:

  fixed       no rate configured and concurrency never lowered (what decoevo did before: retries only)
  adaptive    no rate configured; AIMD concurrency, Retry-After and the remaining-requests header
  configured  requests_per_minute set to 95% of the provider's limit, plus the adaptive limiter

Per set-up: requests answered / sent, 429s met, admitted rate as a share of the limit, wall time.

    .venv/bin/python -m bench.client.rate_limits                     # 600 rpm, 300 requests, 200 ms latency
    .venv/bin/python -m bench.client.rate_limits --rpm 1200 --requests 400 --concurrency 64
"""

from __future__ import annotations

import argparse
import asyncio
import time

from decoevo.lm import LM, GenParams, LMConfig, Message, ModelSpec
from decoevo.lm.ratelimit import AdaptiveLimiter
from decoevo.testing.fake_openai import FakeOpenAI
from decoevo.testing.rate_limited import RateLimitedResponder
from decoevo.testing.server import serve_app


class FixedLimiter(AdaptiveLimiter):
    def _cuts_on(self, admitted_at: float) -> bool:
        return False  # a fixed concurrency


async def drive(url: str, setup: str, args: argparse.Namespace) -> tuple[int, float]:
    spec = ModelSpec(backend="openai", model="fake", base_url=f"{url}/v1", max_concurrency=args.concurrency,
                     max_retries=20, backoff_base_s=0.05, backoff_cap_s=5.0,
                     requests_per_minute=0.95 * args.rpm if setup == "configured" else None)
    lm = LM(LMConfig(models={"default": spec}, use_cache=False))
    if setup == "fixed":
        lm._limiters["default"] = FixedLimiter(args.concurrency)
    started = time.monotonic()
    try:
        results = await asyncio.gather(*(lm.complete([Message("user", f"{setup} {i}")], role="solve",
                                                     params=GenParams(max_tokens=16))
                                         for i in range(args.requests)), return_exceptions=True)
    finally:
        await lm.aclose()
    return sum(1 for r in results if not isinstance(r, BaseException)), time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rpm", type=float, default=600)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.2)
    args = parser.parse_args()
    print(f"provider limit {args.rpm:.0f} rpm, {args.requests} requests, max_concurrency {args.concurrency}, "
          f"latency {args.latency * 1000:.0f} ms")
    print(f"{'setup':<11} {'answered':>9} {'429s':>6} {'rate/limit':>10} {'wall s':>7}")
    for setup in ("fixed", "adaptive", "configured"):
        provider = RateLimitedResponder(args.rpm, delay_s=args.latency)
        with serve_app(FakeOpenAI(provider).app()) as url:
            answered, wall = asyncio.run(drive(url, setup, args))
        print(f"{setup:<11} {answered:>4}/{args.requests:<4} {provider.throttled:>6} "
              f"{provider.served_per_minute() / args.rpm:>10.2f} {wall:>7.1f}")


if __name__ == "__main__":
    main()
