"""OpenMP wait policy of the embedded model: spinning (OpenMP's default) versus passive waiting, on an
idle machine and with other processes wanting the cores (as in a sweep, or a judge server on the box).

Each sample is a fresh child process with OMP_WAIT_POLICY set before llama.cpp loads, that makes the
same calls through `decoevo.lm` with the cache off: one free-text reply and three schema-constrained
verdicts (the grader's shape). The competing load is `--busy` processes spinning in pure Python.
Samples alternate policies, so both see the same machine; the ratio of medians is the result.

    .venv/bin/python -m bench.client.omp_wait                 # idle and 2 busy processes, 3 repeats
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine

CHILD = r"""
import asyncio, json, time
from pydantic import BaseModel, Field
from decoevo.lm import LM, LMConfig, Message, GenParams

class Verdict(BaseModel):
    rationale: str = Field(json_schema_extra={"maxLength": 160})
    met: bool

async def main():
    lm = LM(LMConfig(use_cache=False))
    reply = [Message("user", "My knee hurts after running. What should I do?")]
    await lm.complete(reply, role="warmup", params=GenParams(0.0, 8))
    t0 = time.perf_counter(); tokens = 0
    r = await lm.complete(reply, role="solve", params=GenParams(0.0, 128))
    tokens += r.completion_tokens
    for k, crit in enumerate(["Advises rest", "Suggests seeing a doctor if it gets worse", "Avoids drug doses"]):
        msgs = [Message("system", "You check one criterion against a reply. Return JSON: rationale, met."),
                Message("user", f"<response>\n{r.text}\n</response>\n\nCriterion: {crit}")]
        v = await lm.complete(msgs, role="grade", schema=Verdict, params=GenParams(0.0, 120, sample_index=k))
        tokens += v.completion_tokens
    print(json.dumps({"seconds": time.perf_counter() - t0, "tokens": tokens}))
    await lm.aclose()

asyncio.run(main())
"""


def spin(stop_at: float) -> None:
    x = 0
    while time.time() < stop_at:
        x += 1


def sample(policy: str, threads: int) -> dict[str, float]:
    env = {**os.environ, "OMP_WAIT_POLICY": policy, "OMP_NUM_THREADS": str(threads)}
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=1800,
                         check=True)
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--busy", type=int, default=2, help="competing busy processes in the loaded condition")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = ap.parse_args()

    rows: dict[str, list[dict[str, float]]] = {}
    for rep in range(args.repeats):
        for load in (0, args.busy):
            for policy in ("ACTIVE", "PASSIVE") if rep % 2 == 0 else ("PASSIVE", "ACTIVE"):
                procs = [mp.Process(target=spin, args=(time.time() + 3600,)) for _ in range(load)]
                for p in procs:
                    p.start()
                try:
                    s = sample(policy, args.threads)
                finally:
                    for p in procs:
                        p.terminate()
                        p.join()
                rows.setdefault(f"{policy}/busy{load}", []).append(s)
                print(f"rep {rep} busy {load} {policy}: {s['seconds']:.1f} s, {s['tokens']} tokens", flush=True)

    summary: dict[str, Any] = {}
    for key, samples in rows.items():
        summary[key] = {"median_s": statistics.median(s["seconds"] for s in samples),
                        "tok_s": statistics.median(s["tokens"] / s["seconds"] for s in samples),
                        "samples": samples}
    ratios = {f"busy{load}": summary[f"ACTIVE/busy{load}"]["median_s"] / summary[f"PASSIVE/busy{load}"]["median_s"]
              for load in (0, args.busy)}
    record = {"machine": machine(), "threads": args.threads, "busy": args.busy, "repeats": args.repeats,
              "summary": summary, "active_over_passive_time": ratios}
    out = Path(RESULTS) / "omp_wait.json"
    out.write_text(json.dumps(record, indent=2) + "\n")
    for key, s in summary.items():
        print(f"{key:16s} median {s['median_s']:.2f} s  {s['tok_s']:.1f} tok/s")
    print("time ACTIVE / PASSIVE:", {k: round(v, 2) for k, v in ratios.items()}, "->", out)


if __name__ == "__main__":
    main()
