"""The decision short cuts (`hyper.decision_shortcuts`, docs/cost.md) at the `paper` preset: each method run
twice on the same draws, with the short cuts off (the full computation) and on, comparing every
accept/reject decision and the final skills, and what the short cuts save. In process on the simulated
model (bench/cost/cost_sim.py), in both simulated worlds.

    .venv/bin/python -m bench.cost.cost_shortcuts --seeds 0,1,2   # -> bench/results/cost_shortcuts.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench._common import RESULTS
from bench.cost.cost_sim import WORLDS, config, run
from decoevo.testing.toy_server import write_toy_questions


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--methods", default="decoevo,sc_coevo,direct_audit,no_structural,no_rubric_blind")
    parser.add_argument("--worlds", default="default,held_out")
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_shortcuts.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    out: dict[str, Any] = {"preset": args.preset, "seeds": seeds, "cells": []}
    print("| world | method | seed | same decisions | same skills | decisions | calls full → short | "
          "tokens full → short | rounds settled by Φ_str |")
    print("|---|---|---:|---|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        data = write_toy_questions(Path(tmp) / "questions.jsonl", 300)
        for wname in args.worlds.split(","):
            world, sim_seed = WORLDS[wname]
            for method in args.methods.split(","):
                for seed in seeds:
                    runs = {flag: run(config(data, method, seed, args.preset, {"decision_shortcuts": flag}),
                                      Path(tmp) / f"{wname}-{method}-{seed}-{flag}", world, sim_seed)
                            for flag in (False, True)}
                    full, short = runs[False], runs[True]
                    cell = {"world": wname, "method": method, "seed": seed,
                            "same_decisions": full["decisions"] == short["decisions"],
                            "same_final_skills": (full["final_solver"], full["final_generator"])
                            == (short["final_solver"], short["final_generator"]),
                            "decisions": len(full["decisions"]),
                            "full": {k: v for k, v in full.items() if k not in ("decisions",)},
                            "short": {k: v for k, v in short.items() if k not in ("decisions",)}}
                    out["cells"].append(cell)
                    print(f"| {wname} | {method} | {seed} | {cell['same_decisions']} | {cell['same_final_skills']} | "
                          f"{cell['decisions']} | {full['calls']:,} → {short['calls']:,} | "
                          f"{full['tokens']:,} → {short['tokens']:,} | "
                          f"{short['verifications_settled_by_structural']} of {short['outer_rounds']} |", flush=True)
    out["all_same"] = all(c["same_decisions"] and c["same_final_skills"] for c in out["cells"])
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print("every decision and final skill the same:", out["all_same"])


if __name__ == "__main__":
    main()
