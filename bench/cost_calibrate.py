"""How the `paper` preset's sizes were chosen: a grid of sizes, each run for SkillOpt, DecoEvo, SC-CoEvo and
Direct Audit over 3 seeds in the default simulated world (HealthBench reply lengths), with the relations
of Table 4 in tokens. The paper's own sizes are in a supplement we do not have; Table 4's relations are the
only public constraint on them. The chosen row is then checked, unchanged, in a second world
(bench/cost_table4.py). Every audit runs in every row: only sizes and the schedule vary.

    .venv/bin/python bench/cost_calibrate.py   # -> bench/results/cost_calibrate.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

from _common import RESULTS
from cost_sim import config, run

from decoevo.testing.toy_server import write_toy_questions

METHODS = ("skillopt", "decoevo", "sc_coevo", "direct_audit")


def relations(data: Path, tmp: Path, hyper: dict[str, Any], splits: dict[str, Any], seeds: list[int],
              world: Any = None, sim_seed: int = 0, preset: str = "paper") -> dict[str, Any]:
    tokens: dict[str, list[int]] = {m: [] for m in METHODS}
    rounds: dict[str, list[int]] = {m: [] for m in METHODS}
    for seed in seeds:
        for m in METHODS:
            cell = run(config(data, m, seed, preset, hyper, splits), tmp / f"{m}-{seed}", world, sim_seed)
            tokens[m].append(cell["tokens"])
            rounds[m].append(cell["outer_rounds"])
    per_seed = [{"decoevo_over_skillopt": tokens["decoevo"][i] / tokens["skillopt"][i],
                 "sc_coevo_over_decoevo": tokens["sc_coevo"][i] / tokens["decoevo"][i],
                 "direct_audit_over_decoevo": tokens["direct_audit"][i] / tokens["decoevo"][i]}
                for i in range(len(seeds))]
    mean = {k: sum(s[k] for s in per_seed) / len(per_seed) for k in per_seed[0]}
    return {"mean": mean, "per_seed": per_seed, "tokens": tokens, "outer_rounds": rounds}


def meets(mean: dict[str, float]) -> bool:
    return (abs(mean["decoevo_over_skillopt"] - 1.89) <= 0.15 and mean["sc_coevo_over_decoevo"] >= 0.85
            and mean["direct_audit_over_decoevo"] >= 0.85)


GRID = {  # (hyper, splits) options; rows are the product. M < K, so stall-triggered rounds can run.
    "rollouts": [4, 6], "audit_every": [5, 8], "max_stalls": [3], "probe": [12], "generator_gate": [6, 10],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--grid", type=json.loads, default=GRID, help="JSON: the grid (default %(default)s)")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_calibrate.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        data = write_toy_questions(Path(tmp) / "questions.jsonl", 300)
        for i, values in enumerate(itertools.product(*args.grid.values())):
            v = dict(zip(args.grid, values, strict=True))
            hyper = {"rollouts": v["rollouts"], "audit_every": v["audit_every"], "max_stalls": v["max_stalls"],
                     "audit_schedule": "since_last_round"}
            splits = {"probe": v["probe"], "generator_gate": v["generator_gate"]}
            r = relations(data, Path(tmp) / str(i), hyper, splits, seeds)
            rows.append({"hyper": hyper, "splits": splits, **r, "meets_table4": meets(r["mean"])})
            m = r["mean"]
            print(f"{v} ÷SkillOpt {m['decoevo_over_skillopt']:.2f} SC {m['sc_coevo_over_decoevo']:.2f} "
                  f"DA {m['direct_audit_over_decoevo']:.2f} rounds {r['outer_rounds']['decoevo']} "
                  f"{'MEETS' if rows[-1]['meets_table4'] else ''}", flush=True)
    args.out.write_text(json.dumps({"seeds": seeds, "grid": args.grid, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
