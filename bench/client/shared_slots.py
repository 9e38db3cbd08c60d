"""Client CPU per call that the shared endpoint slots add (`DECOEVO_SHARED_SLOTS`, lm/shared_slots.py).

`LM.complete` on an instant in-process backend (no cache, no HTTP), N calls with C in flight, without and
with shared slots; CPU is the process's user+system time. Runs alternate (off, on, off, on, ...) so both
see the same load; the median of the repeats is reported. Two cases with slots on:
  free      the endpoint has C slots: every request takes a free slot at once (one flock, one unlock)
  contended another holder keeps C/2 of the C slots: requests wait for the poller, as with busy neighbours

    .venv/bin/python -m bench.client.shared_slots [--calls 4000] [--concurrency 16] [--repeats 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time

from decoevo.lm import LM, LMConfig, Message, ModelSpec
from decoevo.lm.shared_slots import ENV, FileSlots
from decoevo.lm.types import BackendRequest, Completion


class Instant:
    """A server backend that answers at once, after yielding to the loop once as a socket read would."""

    identity = "bench:instant"

    def __init__(self, max_concurrency: int) -> None:
        self.max_concurrency = max_concurrency

    async def complete(self, request: BackendRequest) -> Completion:
        await asyncio.sleep(0)
        return Completion(text="ok", prompt_tokens=10, completion_tokens=2)

    async def aclose(self) -> None:
        pass


async def _calls(n: int, concurrency: int, taken: int, where: str | None) -> float:
    spec = ModelSpec(backend="openai", model="bench", base_url="http://bench/v1", max_concurrency=concurrency)
    lm = LM(LMConfig(models={"default": spec}, use_cache=False), backends={"default": Instant(concurrency)})
    neighbour = FileSlots(where, "http://bench/v1", concurrency) if where else None  # flock: as another process
    held = [await neighbour.acquire() for _ in range(taken)] if neighbour else []
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await lm.complete([Message("user", f"q{i}")], role="solver")

    await one(-1)  # warm: imports, pools
    started = time.process_time()
    await asyncio.gather(*[one(i) for i in range(n)])
    cpu = time.process_time() - started
    await lm.aclose()
    if neighbour is not None:
        for slot in held:
            neighbour.release(slot)
        neighbour.close()
    return cpu / n


def run(n: int, concurrency: int, taken: int | None, where: str) -> float:
    if taken is None:
        os.environ.pop(ENV, None)
        return asyncio.run(_calls(n, concurrency, 0, None))
    os.environ[ENV] = where
    try:
        return asyncio.run(_calls(n, concurrency, taken, where))
    finally:
        os.environ.pop(ENV, None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cases = {"off": None, "free": 0, "contended": args.concurrency // 2}
    per_call: dict[str, list[float]] = {k: [] for k in cases}
    with tempfile.TemporaryDirectory() as where:
        for _ in range(args.repeats):
            for name, taken in cases.items():
                per_call[name].append(run(args.calls, args.concurrency, taken, where))
    base = statistics.median(per_call["off"])
    print(f"{args.calls} calls, {args.concurrency} in flight, median of {args.repeats}: client CPU per call")
    for name, values in per_call.items():
        med = statistics.median(values)
        extra = "" if name == "off" else f"  ({(med - base) * 1e3:+.4f} ms)"
        print(f"  {name:<10} {med * 1e3:.4f} ms{extra}")


if __name__ == "__main__":
    main()
