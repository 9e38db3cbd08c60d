"""The ledger against the server's own count when a run is killed with requests in flight.

A real `decoevo run` (3 inner steps, the toy world) at the default concurrency, against a server that
answers each request after `--delay-ms`, is SIGKILLed `--kills` times, each time after 10 to 60 more
requests reached the server (drawn from `random.Random(seed)`), resumed after each kill, and the last
resume runs to the end. The server counts every chat request it received: what a provider bills. Per
trial: requests received, the ledger's paid calls, of those the estimated ones (sent, never answered:
lm/journal.py), and the answered ones alone (what the ledger counted before the write-ahead record).

    .venv/bin/python -m bench.reliability.billed_kills                       # 5 trials (seeds 0-4) x 5 kills, 50 ms
    .venv/bin/python -m bench.reliability.billed_kills --trials 10 --kills 8
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions


def start(args: list[str], cache: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "DECOEVO_CACHE": str(cache)}
    return subprocess.Popen(
        [sys.executable, "-m", "decoevo", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def trial(seed: int, kills: int, delay_s: float, steps: int) -> dict[str, Any]:
    server = toy_server(delay_s)
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as tmp, serve_app(server.app()) as url:
        root = Path(tmp)
        data = write_toy_questions(root / "toy.jsonl")
        run_dir = root / "runs" / "killed"
        args = toy_run_args(f"{url}/v1", data, root / "runs", "killed", steps=steps)
        points = []
        for k in range(kills + 1):
            proc = start(args if k == 0 else ["resume", str(run_dir)], root / "cache.sqlite")
            if k == kills:
                out, _ = proc.communicate(timeout=1800)
                if proc.returncode != 0:
                    sys.exit(f"seed {seed}: the last resume failed:\n{out}")
                break
            target = len(server.requests) + rng.randint(10, 60)
            while len(server.requests) < target and proc.poll() is None:
                time.sleep(0.002)
            points.append(len(server.requests))
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()
            time.sleep(0.1)  # the requests the kernel had already sent reach the server
        total = json.loads((run_dir / "ledger.json").read_text())["total"]
    received = len(server.requests)
    billed, estimated = total["calls"], total["estimated_calls"]
    return {
        "seed": seed,
        "kill_points": points,
        "received": received,
        "ledger_calls": billed,
        "estimated_calls": estimated,
        "answered_calls": billed - estimated,
        "ledger_minus_received": billed - received,
        "answered_minus_received": billed - estimated - received,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--delay-ms", type=float, default=50.0)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS / "billed_kills.json")
    args = parser.parse_args()
    rows = []
    for seed in range(args.trials):
        row = trial(seed, args.kills, args.delay_ms / 1000, args.steps)
        rows.append(row)
        print(
            f"seed {seed}: received {row['received']}, ledger {row['ledger_calls']} "
            f"({row['estimated_calls']} estimated), answered only {row['answered_calls']}",
            flush=True,
        )

    def spread(key: str) -> dict[str, float]:
        values = [r[key] for r in rows]
        return {"min": min(values), "median": statistics.median(values), "max": max(values)}

    summary = {
        key: spread(key)
        for key in (
            "received",
            "ledger_calls",
            "estimated_calls",
            "answered_calls",
            "ledger_minus_received",
            "answered_minus_received",
        )
    }
    summary["trials_with_ledger_below_received"] = sum(r["ledger_calls"] < r["received"] for r in rows)
    result = {
        "machine": machine(),
        "kills": args.kills,
        "delay_ms": args.delay_ms,
        "steps": args.steps,
        "concurrency": "default (64)",
        "summary": summary,
        "trials": rows,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(summary, indent=1))
    print(f"-> {args.out}")


if __name__ == "__main__":
    main()
