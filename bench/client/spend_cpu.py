"""Client CPU per paid request that the experiment's spend file adds (`DECOEVO_SPEND_FILE`, with and without
`DECOEVO_MAX_COST`, lm/spend.py): since the hard cap, a reservation under the file lock before each request
and its settlement after; before (`--old REV`), a read of the sum before and one appended line after.

`LM.complete` on an instant in-process priced backend (no cache, no HTTP), N calls with C in flight; CPU is
the process's user+system time per call, in its own interpreter per measurement, cases alternating so all
see the same load; the median of the repeats. Cases:
  off        no spend file
  file       a spend file, no cap (every request still reserves, so a kill is counted at its estimate)
  cap        a spend file and a cap the requests never reach
  cap_x3     the same, three processes at once on one file (lock contention; the mean of the three)

    .venv/bin/python -m bench.client.spend_cpu [--calls 4000] [--concurrency 16] [--repeats 5] [--old 5ea5f5d]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine

ROOT = Path(__file__).resolve().parents[2]
CASES = ("off", "file", "cap", "cap_x3")


async def _calls(n: int, concurrency: int) -> float:
    from decoevo.lm import LM, LMConfig, Message, ModelSpec
    from decoevo.lm.types import BackendRequest, Completion

    class Instant:
        identity = "bench:instant"
        max_concurrency = concurrency

        async def complete(self, request: BackendRequest) -> Completion:
            await asyncio.sleep(0)  # yields to the loop once, as a socket read would
            return Completion(text="ok", prompt_tokens=10, completion_tokens=2)

        async def aclose(self) -> None:
            pass

    spec = ModelSpec(input_price_per_mtok=2.5, output_price_per_mtok=10.0, max_concurrency=concurrency)
    lm = LM(LMConfig(models={"default": spec}, use_cache=False), backends={"default": Instant()})
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            await lm.complete([Message("user", f"q{i}")], role="solver")

    await one(-1)  # warm: imports
    started = time.process_time()
    await asyncio.gather(*[one(i) for i in range(n)])
    cpu = time.process_time() - started
    await lm.aclose()
    return cpu / n


def worker(n: int, concurrency: int, start: float) -> None:
    time.sleep(max(0.0, start - time.time()))
    print(json.dumps({"cpu_per_call_s": asyncio.run(_calls(n, concurrency))}))


def measure(src: Path, case: str, n: int, concurrency: int, where: Path) -> float:
    """CPU seconds per call in `case`, with `src`'s decoevo, each process in its own interpreter."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DECOEVO_")}
    env["PYTHONPATH"] = f"{src}{os.pathsep}{ROOT}"
    if case != "off":
        spend = where / f"spend-{case}-{time.monotonic_ns()}.log"
        env["DECOEVO_SPEND_FILE"] = str(spend)
        if case.startswith("cap"):
            env["DECOEVO_MAX_COST"] = "1000000"
    procs = 3 if case == "cap_x3" else 1
    start = time.time() + 2.0  # after every interpreter has started
    cmd = [sys.executable, "-m", "bench.client.spend_cpu", "--worker", "--calls", str(n),
           "--concurrency", str(concurrency), "--start", repr(start)]
    running = [subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True) for _ in range(procs)]
    values = [json.loads(p.communicate(timeout=600)[0])["cpu_per_call_s"] for p in running]
    return statistics.fmean(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--old", default="5ea5f5d", help="the revision before the hard cap ('' to skip it)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(RESULTS / "spend_cpu.json"))
    args = parser.parse_args()
    if args.worker:
        worker(args.calls, args.concurrency, args.start)
        return
    from bench.scale.paper_scale import extract_src

    result: dict[str, Any] = {"calls": args.calls, "concurrency": args.concurrency, "repeats": args.repeats,
                              "machine": machine()}
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"new": ROOT / "src"}
        if args.old:
            codes["old"] = extract_src(args.old, Path(tmp) / "old")
            result["old_revision"] = args.old
        per_call = {code: {case: [] for case in CASES} for code in codes}  # type: dict[str, dict[str, list[float]]]
        for _ in range(args.repeats):
            for case in CASES:
                for code, src in codes.items():
                    per_call[code][case].append(measure(src, case, args.calls, args.concurrency, Path(tmp)))
    for code, cases in per_call.items():
        base = statistics.median(cases["off"])
        result[code] = {case: {"ms_per_call": [round(v * 1e3, 4) for v in values],
                               "median_ms": round(statistics.median(values) * 1e3, 4),
                               "added_ms": round((statistics.median(values) - base) * 1e3, 4)}
                        for case, values in cases.items()}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"{args.calls} calls, {args.concurrency} in flight, median of {args.repeats}: client CPU per call")
    for code in codes:
        for case in CASES:
            row = result[code][case]
            print(f"  {code:<4} {case:<7} {row['median_ms']:.4f} ms  ({row['added_ms']:+.4f} ms)")


if __name__ == "__main__":
    main()
