"""Table 4's relations with the defaults: DecoEvo ÷ SkillOpt tokens (paper: 1.89×), SC-CoEvo ÷ DecoEvo and
Direct Audit ÷ DecoEvo (paper: ≈1.0 and 0.988; the aim here ≥ 0.85), mean of 3 seeds, every seed shown,
for the `paper` preset (calibrated in the default world by bench/cost_calibrate.py) and `paper-full`
(the earlier sizes), in the default simulated world and in the held-out world (bench/cost_sim.py), which
was fixed before any figure was computed in it. Stall-triggered rounds are on, as in every preset.

    .venv/bin/python bench/cost_table4.py   # -> bench/results/cost_table4.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from _common import RESULTS
from cost_calibrate import meets, relations
from cost_sim import WORLDS

from decoevo.testing.toy_server import write_toy_questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--presets", default="paper,paper-full")
    parser.add_argument("--worlds", default="default,held_out")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_table4.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    out: dict[str, Any] = {"seeds": seeds, "cells": []}
    print("| preset | world | DecoEvo ÷ SkillOpt (per seed) | SC-CoEvo ÷ DecoEvo | Direct Audit ÷ DecoEvo | "
          "DecoEvo rounds | meets Table 4 |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        data = write_toy_questions(Path(tmp) / "questions.jsonl", 300)
        for preset in args.presets.split(","):
            for wname in args.worlds.split(","):
                world, sim_seed = WORLDS[wname]
                r = relations(data, Path(tmp) / f"{preset}-{wname}", {}, {}, seeds, world, sim_seed, preset)
                out["cells"].append({"preset": preset, "world": wname, **r, "meets_table4": meets(r["mean"])})

                def show(key: str) -> str:
                    each = ", ".join(f"{s[key]:.2f}" for s in r["per_seed"])  # noqa: B023
                    return f"**{r['mean'][key]:.2f}** ({each})"  # noqa: B023

                print(f"| {preset} | {wname} | {show('decoevo_over_skillopt')} | {show('sc_coevo_over_decoevo')} | "
                      f"{show('direct_audit_over_decoevo')} | {r['outer_rounds']['decoevo']} | "
                      f"{meets(r['mean'])} |", flush=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
