"""Table 4's relations with the defaults: DecoEvo ÷ SkillOpt tokens (paper: 1.89×), SC-CoEvo ÷ DecoEvo and
Direct Audit ÷ DecoEvo (paper: ≈1.0 and 0.988; the aim here ≥ 0.85), mean of 3 seeds, every seed shown,
for the `paper` preset (sized over the selection family of worlds by bench/cost/cost_calibrate.py) and
`paper-full` (the earlier sizes), in worlds the sizes were not chosen in: the hand-written held-out world
(bench/cost/cost_sim.py) and the check family (bench/cost/cost_worlds.py), both fixed before any figure was computed
in them; the default world and the selection family are shown too. Stall-triggered rounds are on, as in
every preset. Runs in parallel (one process per core).

    .venv/bin/python -m bench.cost.cost_table4   # -> bench/results/cost_table4.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from bench._common import RESULTS
from bench.cost.cost_worlds import CHECK, SELECTION, relations_many, slack


def meets(mean: dict[str, float]) -> bool:
    return slack(mean) >= 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--presets", default="paper,paper-full")
    parser.add_argument("--worlds", default=",".join(SELECTION + CHECK))
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_table4.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    worlds = args.worlds.split(",")
    out: dict[str, Any] = {"seeds": seeds, "selection_worlds": SELECTION, "check_worlds": CHECK, "cells": []}
    print("| preset | world | used to size `paper` | DecoEvo ÷ SkillOpt (per seed) | SC-CoEvo ÷ DecoEvo | "
          "Direct Audit ÷ DecoEvo | DecoEvo rounds | meets Table 4 |")
    print("|---|---|---|---|---|---|---|---|")
    for preset in args.presets.split(","):
        [by_world] = relations_many([({}, {})], worlds, seeds, preset)
        for wname, r in by_world.items():
            out["cells"].append({"preset": preset, "world": wname, "selection": wname in SELECTION, **r,
                                 "meets_table4": meets(r["mean"])})

            def show(key: str) -> str:
                each = ", ".join(f"{s[key]:.2f}" for s in r["per_seed"])  # noqa: B023
                return f"**{r['mean'][key]:.2f}** ({each})"  # noqa: B023

            print(f"| {preset} | {wname} | {'yes' if wname in SELECTION else 'no'} | "
                  f"{show('decoevo_over_skillopt')} | {show('sc_coevo_over_decoevo')} | "
                  f"{show('direct_audit_over_decoevo')} | {r['outer_rounds']['decoevo']} | "
                  f"{meets(r['mean'])} |", flush=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
