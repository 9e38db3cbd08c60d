"""How the `paper` preset's sizes were chosen: a grid of sizes, each row run for SkillOpt, DecoEvo, SC-CoEvo
and Direct Audit over 3 seeds in every world of the *selection* family (the default world and four worlds
drawn by bench/cost/cost_worlds.py), with Table 4's relations in tokens. A row is ranked by its smallest slack
over those worlds (`cost_worlds.slack`: how far inside the aims the worst world's mean is). The chosen
row is then checked, unchanged, in worlds it was not chosen in (bench/cost/cost_table4.py). The paper's own
sizes are in a supplement we do not have; Table 4's relations are the only public constraint on them.
Every audit runs in every row: only sizes and the schedule vary.

    .venv/bin/python -m bench.cost.cost_calibrate --grid '{"probe": [12], "generator_gate": [5, 6], ...}' \
        --out bench/results/cost_calibrate_family_3.json
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

from bench._common import RESULTS
from bench.cost.cost_worlds import SELECTION, relations_many, slack

GRID = {"probe": [12], "generator_gate": [5, 6], "audit_every": [6], "max_stalls": [4, 5], "rollouts": [6, 8]}


def rows_of(grid: dict[str, list[Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    rows = []
    for values in itertools.product(*grid.values()):
        v = dict(zip(grid, values, strict=True))
        hyper = {"rollouts": v["rollouts"], "audit_every": v["audit_every"], "max_stalls": v["max_stalls"],
                 "audit_schedule": "since_last_round", "pairs_per_question": v.get("pairs_per_question", 2)}
        rows.append((hyper, {"probe": v["probe"], "generator_gate": v["generator_gate"]}))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--grid", type=json.loads, default=GRID, help="JSON: the grid (default %(default)s)")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_calibrate_family.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    out: list[dict[str, Any]] = []
    for hyper, splits in rows_of(args.grid):
        started = time.monotonic()
        [by_world] = relations_many([(hyper, splits)], SELECTION, seeds)
        worst = min(slack(r["mean"]) for r in by_world.values())
        out.append({"hyper": hyper, "splits": splits, "worlds": by_world, "min_slack": worst})
        shown = " | ".join(f"{w}: {r['mean']['decoevo_over_skillopt']:.2f} {r['mean']['sc_coevo_over_decoevo']:.2f} "
                           f"{r['mean']['direct_audit_over_decoevo']:.2f}" for w, r in by_world.items())
        sizes = (f"{splits} L={hyper['rollouts']} H={hyper['pairs_per_question']} K={hyper['audit_every']} "
                 f"M={hyper['max_stalls']}")
        print(f"{sizes}  {shown}  min slack {worst:.3f} ({time.monotonic() - started:.0f} s)", flush=True)
        args.out.write_text(json.dumps({"seeds": seeds, "worlds": SELECTION, "grid": args.grid, "rows": out},
                                       indent=2) + "\n")


if __name__ == "__main__":
    main()
