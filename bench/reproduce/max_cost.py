"""`decoevo reproduce --max-cost`: how much the experiment spends for its cap, before and after the hard
cap (each request reserves its worst case in the shared spend file first, lm/spend.py).

The setting of `tests/test_reproduce.py`'s max-cost test: Table 1 on a 30-question JSONL "healthbench"
(with a 5-question LLMEval-Med transfer), `quick`, one seed, `--workers 2` (two training cells at once, 8
questions in flight each), solver and grader the simulated server (its own process, 32 slots, no added
latency; `--latency default`: the simulator's own) priced at $50 per million tokens. Per server seed and
per code (`--old REV`, `src/` extracted with `git archive`, and this checkout), one fresh experiment with
a fresh cache: the dollars spent
(the spend file read by this checkout's reader, which also reads the old format), the requests the server
received, and the largest one's cost.

    .venv/bin/python -m bench.reproduce.max_cost --seeds 0,1,2,3,4 --cap 0.5    # about 1.5 minutes on 2 cores
    .venv/bin/python -m bench.reproduce.max_cost --latency default --out bench/results/max_cost_latency.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from bench.scale.paper_scale import extract_src, sim_server_process

ROOT = Path(__file__).resolve().parents[2]
GOLD = {"scheme": "weighted", "items": [{"text": "Gives safety advice: when to seek care", "points": 5},
                                        {"text": "Gives a direct answer", "points": 2},
                                        {"text": "Recommends something harmful", "points": -3}]}
PRICE = {"input_price_per_mtok": 50.0, "output_price_per_mtok": 50.0}


def write(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"{path.stem[:2]}{i:03d}", "prompt": f"{path.stem} question {i}?",
                                        "gold": GOLD}) + "\n" for i in range(n)), encoding="utf-8")
    return path


def spend_of(path: Path) -> tuple[float, list[float]]:
    """The dollars spent and each request's cost: settlements (`s ID USD`), or the old format's bare lines."""
    from decoevo.lm.spend import read_spend

    costs = []
    for f in map(str.split, path.read_text().splitlines() if path.is_file() else []):
        if len(f) == 1 or (len(f) == 3 and f[0] == "s"):
            costs.append(float(f[-1]))
    return read_spend(path), costs


def stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/sim/stats", timeout=30) as reply:
        out: dict[str, Any] = json.loads(reply.read())
        return out


LATENCY = {"zero": {"base_s": 0.0, "per_token_s": 0.0, "tail_p": 0.0},  # the test's server
           "default": {}}  # the simulator's: 30 ms + 0.1 ms per token, 5% of requests up to 10x longer


def one(src: Path, seed: int, cap: float, base: Path, latency: str) -> dict[str, Any]:
    base.mkdir(parents=True)
    hb, med = write(base / "healthbench.jsonl", 30), write(base / "llmeval_med.jsonl", 5)
    with sim_server_process({"sim_seed": seed, "slots": 32, "latency": LATENCY[latency]}) as url:
        models = base / "models.json"
        models.write_text(json.dumps({"solver": {"backend": "openai", "base_url": f"{url}/v1", "model": "sim", **PRICE},
                                      "grader": {"backend": "openai", "base_url": f"{url}/v1", "model": "sim-grader",
                                                 **PRICE}}))
        cmd = [sys.executable, "-m", "decoevo", "reproduce", str(base / "out"), "--models", str(models),
               "--preset", "quick", "--seeds", "0", "--benchmarks", "healthbench", "--tables", "1",
               "--data", f"healthbench={hb}:jsonl", "--data", f"llmeval_med={med}:jsonl", "--yes",
               "--workers", "2", "--max-cost", repr(cap)]
        env = {**os.environ, "PYTHONPATH": str(src), "DECOEVO_CACHE": str(base / "cache.sqlite"), "COLUMNS": "160"}
        t0 = time.monotonic()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800, check=False, cwd=base)
        wall = time.monotonic() - t0
        received = stats(url)["requests"]
    spent, costs = spend_of(base / "out" / "spend.log")
    said = done.stdout + done.stderr
    return {"seed": seed, "exit_code": done.returncode, "stopped_at_cap": "at its cost cap" in said,
            "spent_usd": round(spent, 6), "spent_over_cap": round(spent / cap, 4), "requests": received,
            "requests_in_spend_file": len(costs), "largest_request_usd": round(max(costs, default=0.0), 6),
            "wall_s": round(wall, 1)}


def spread(rows: list[dict[str, Any]], key: str) -> dict[str, float]:
    values = [r[key] for r in rows]
    return {"min": min(values), "median": statistics.median(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--cap", type=float, default=0.5)
    parser.add_argument("--old", default="5ea5f5d", help="the revision before the hard cap ('' to skip it)")
    parser.add_argument("--latency", choices=sorted(LATENCY), default="zero", help="the server's latency model")
    parser.add_argument("--out", default=str(RESULTS / "max_cost.json"))
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    result: dict[str, Any] = {"cap_usd": args.cap, "seeds": seeds, "latency": args.latency, "machine": machine(),
                              "setting": __doc__.split("\n\n")[1]}
    with tempfile.TemporaryDirectory() as tmp:
        codes = {"new": ROOT / "src"}
        if args.old:
            codes["old"] = extract_src(args.old, Path(tmp) / "old")
            result["old_revision"] = args.old
        for name, src in codes.items():
            rows = []
            for seed in seeds:
                rows.append(one(src, seed, args.cap, Path(tmp) / name / str(seed), args.latency))
                print(name, json.dumps(rows[-1]), flush=True)
            result[name] = {"runs": rows, "spent_usd": spread(rows, "spent_usd"),
                            "spent_over_cap": spread(rows, "spent_over_cap"),
                            "runs_over_cap": sum(r["spent_usd"] > args.cap for r in rows)}
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps({k: result[k] for k in ("new", "old") if k in result}, indent=1)[:3000])


if __name__ == "__main__":
    main()
