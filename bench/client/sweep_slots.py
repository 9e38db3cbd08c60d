"""A sweep's use of one server: cells × methods against the simulated server (`decoevo.testing.sim_server`),
which counts requests in flight on its side. The endpoint's limit is the model's `max_concurrency`; the
server itself has more slots, so only the client side keeps the sweep within the limit.

Reported: requests, the most in flight (never above the limit), and the slots' utilisation over the sweep's
whole wall time (busy slot-seconds ÷ (limit × wall seconds): idle time counts), and, second, while any
request was in flight (÷ (limit × active seconds), which leaves the idle time out).

    .venv/bin/python -m bench.client.sweep_slots [--seeds 4] [--limit 8] [--latency 0.1] [--steps 3]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from decoevo.testing.server import serve_app
from decoevo.testing.sim_model import LatencyModel
from decoevo.testing.sim_server import SimServer, SimServerConfig
from decoevo.testing.toy_server import write_toy_questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", default="decoevo,skillopt")
    parser.add_argument("--seeds", type=int, default=4)
    parser.add_argument("--limit", type=int, default=8)
    parser.add_argument("--latency", type=float, default=0.1)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    server = SimServer(SimServerConfig(seed=0, slots=max(64, 8 * args.limit),
                                       latency=LatencyModel.fixed(args.latency)))
    with tempfile.TemporaryDirectory() as tmp, serve_app(server.app()) as url:
        root = Path(tmp)
        data = write_toy_questions(root / "toy.jsonl", 60)
        spec = {
            "methods": args.methods.split(","), "seeds": list(range(args.seeds)), "preset": "default",
            "benchmarks": [{"name": "toy", "data": str(data), "task": "healthbench"}],
            "splits": {"train": 12, "probe": 4, "solver_gate": 6, "generator_gate": 6, "test": 0},
            "hyper": {"steps": args.steps, "batch_size": 4, "audit_every": 1, "rollouts": 4, "budget_step_cap": 2},
            "lm": {"models": {"default": {"backend": "openai", "model": "sim", "base_url": f"{url}/v1",
                                          "max_concurrency": args.limit}}},
            "evaluate": [],
        }
        (root / "grid.yaml").write_text(yaml.safe_dump(spec))
        command = [sys.executable, "-m", "decoevo", "sweep", str(root / "SW"), "--spec", str(root / "grid.yaml")]
        if args.workers:
            command += ["--workers", str(args.workers)]
        env = {k: v for k, v in os.environ.items() if not k.startswith("DECOEVO_")}  # a fresh cache, no slots set
        env["DECOEVO_CACHE"] = str(root / "cache.sqlite")
        started = time.monotonic()
        proc = subprocess.run(command, env=env, capture_output=True, text=True)
        wall = time.monotonic() - started
        if proc.returncode != 0:
            sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
    stats = server.stats.snapshot()
    busy_wall = stats["busy_slot_s"] / (args.limit * wall) if wall else 0.0
    busy = stats["busy_slot_s"] / (args.limit * stats["active_s"]) if stats["active_s"] else 0.0
    first = next((line for line in proc.stdout.splitlines() if "worker(s)" in line), "")
    print(first.strip())
    print(f"{stats['served']} requests in {wall:.1f} s; at most {stats['max_in_flight']} in flight of {args.limit}; "
          f"{busy_wall:.1%} of the slots busy over the wall time ({busy:.1%} while any request was in flight, "
          f"{stats['active_s']:.1f} s)")


if __name__ == "__main__":
    main()
