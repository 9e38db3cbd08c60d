"""How close the estimate printed before a run (`decoevo.engine.estimate`) comes to the paid calls the
run makes, seed by seed: methods at the `paper` preset, in process on the simulated model (bench/cost/cost_sim.py),
in the world its constants were fit to (`default`) and in worlds they were not fit to: the held-out world
of bench/cost/cost_table4.py, and the default world with fewer or more decided blind pairs and with closer
response qualities (fewer solver-gate acceptances).

    .venv/bin/python -m bench.cost.estimate_accuracy --seeds 0,1,2   # -> bench/results/estimate_accuracy.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from pathlib import Path
from typing import Any

from bench._common import RESULTS
from bench.cost.cost_sim import HELD_OUT_SIM_SEED, HELD_OUT_WORLD, config, run
from decoevo.engine.estimate import estimate_calls
from decoevo.methods import get_method
from decoevo.testing.sim_model import SimWorld
from decoevo.testing.toy_server import write_toy_questions

WORLDS: dict[str, tuple[SimWorld | None, int]] = {
    "default (fit)": (None, 0),
    "held_out": (HELD_OUT_WORLD, HELD_OUT_SIM_SEED),
    "few_decided_pairs": (SimWorld(equivalent_gap=0.3), 0),  # about 2.5x the "equivalent" verdicts
    "many_decided_pairs": (SimWorld(equivalent_gap=0.03, position_flip=0.05), 0),
    "close_qualities": (SimWorld(quality_spread=0.4), 0),  # smaller score gaps: fewer gate acceptances
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default="skillopt,decoevo,sc_coevo,direct_audit")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--worlds", default=",".join(WORLDS))
    parser.add_argument("--out", type=Path, default=RESULTS / "estimate_accuracy.json")
    args = parser.parse_args()
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = write_toy_questions(Path(tmp) / "questions.jsonl", 300)
        for wname in args.worlds.split(","):
            world, sim_seed = WORLDS[wname]
            for method in args.methods.split(","):
                for seed in (int(s) for s in args.seeds.split(",")):
                    cfg = config(data, method, seed)
                    est = estimate_calls(get_method(method), cfg.hyper, cfg.splits)
                    cell = run(cfg, Path(tmp) / f"{wname}-{method}-{seed}", world, sim_seed)
                    rows.append({"world": wname, "method": method, "seed": seed, "paid": cell["calls"],
                                 "outer_rounds": cell["outer_rounds"], "solver_accepts": cell["solver_accepts"],
                                 "estimated_paid": est.expected, "high_estimate": est.upper_bound,
                                 "error": est.expected / cell["calls"] - 1})
                    print(json.dumps(rows[-1]), flush=True)
    args.out.write_text(json.dumps({"preset": "paper", "rows": rows}, indent=2) + "\n")
    print("| world | method | paid per seed | estimated | error per seed | within high estimate |")
    print("|---|---|---|---:|---|---|")
    for wname in dict.fromkeys(r["world"] for r in rows):
        for method in dict.fromkeys(r["method"] for r in rows):
            mine = [r for r in rows if r["world"] == wname and r["method"] == method]
            errs = [r["error"] for r in mine]
            paid = ", ".join(f"{r['paid']:,}" for r in mine)
            print(f"| {wname} | {method} | {paid} | {mine[0]['estimated_paid']:,} "
                  f"| {', '.join(f'{e:+.0%}' for e in errs)} (median {statistics.median(errs):+.0%}) "
                  f"| {all(r['paid'] <= r['high_estimate'] for r in mine)} |")


if __name__ == "__main__":
    main()
