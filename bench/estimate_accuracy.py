"""How close the estimate printed before a run (`decoevo.engine.estimate`) comes to the paid calls the
run makes: every method at the `paper` preset, in process on the simulated model and a virtual clock
(the same calls as over HTTP, `bench/paper_scale.py`'s first run).

    .venv/bin/python bench/estimate_accuracy.py --seeds 0,1   # -> bench/results/estimate_accuracy.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from _common import RESULTS
from paper_scale_roles import _run

from decoevo.engine.config import config_from_dict, deep_merge
from decoevo.engine.estimate import estimate_calls
from decoevo.methods import METHODS, get_method
from decoevo.presets import PRESETS
from decoevo.testing.sim_backend import run_virtual
from decoevo.testing.toy_server import write_toy_questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default=",".join(m for m in METHODS if m != "budget_matched"))
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--out", type=Path, default=RESULTS / "estimate_accuracy.json")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = write_toy_questions(Path(tmp) / "questions.jsonl", 300)
        for method in args.methods.split(","):
            for seed in (int(s) for s in args.seeds.split(",")):
                config = config_from_dict(deep_merge(PRESETS["paper"], {
                    "method": method, "seed": seed, "data": {"path": str(data), "format": "jsonl"}}))
                est = estimate_calls(get_method(method), config.hyper, config.splits)
                workdir = Path(tmp) / f"{method}-{seed}"
                workdir.mkdir()
                roles, _ = run_virtual(_run(config, workdir))
                paid = sum(r["calls"] for r in roles.values())
                cached = sum(r["cached"] for r in roles.values())
                rows.append({"method": method, "seed": seed, "paid": paid, "cached": cached,
                             "estimated_paid": est.expected, "estimated_cached": est.cached,
                             "high_estimate": est.upper_bound, "error": est.expected / paid - 1 if paid else 0.0})
                print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps({"preset": "paper", "rows": rows}, indent=2) + "\n")
    print("| method | seeds | paid (mean) | estimated | error | cached (mean) | estimated cached |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for method in dict.fromkeys(r["method"] for r in rows):
        mine = [r for r in rows if r["method"] == method]
        paid = sum(r["paid"] for r in mine) / len(mine)
        cached = sum(r["cached"] for r in mine) / len(mine)
        est = mine[0]["estimated_paid"]
        err = f"{est / paid - 1:+.0%}" if paid else "–"
        est_cached = mine[0]["estimated_cached"]
        print(f"| {method} | {len(mine)} | {paid:,.0f} | {est:,} | {err} | {cached:,.0f} | {est_cached:,} |")


if __name__ == "__main__":
    main()
