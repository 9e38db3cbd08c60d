"""DecoEvo ÷ SkillOpt in paid calls and tokens at the `paper` preset, with each cost option of `Hyper`
(docs/cost.md) off and on: in process on the simulated model and a virtual clock (`bench/scale/paper_scale.py`'s
first run: the same calls as over HTTP, in seconds of CPU).

    .venv/bin/python -m bench.cost.cost_levers --seeds 0,1,2   # -> bench/results/cost_levers.json
    .venv/bin/python -m bench.cost.cost_levers --variants default,since_last_round --out /tmp/x.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from bench._common import RESULTS
from bench.scale.paper_scale_roles import _run
from decoevo.engine.config import config_from_dict, deep_merge
from decoevo.presets import PRESETS
from decoevo.testing.sim_backend import run_virtual
from decoevo.testing.toy_server import write_toy_questions

ALL_THREE = {"reuse_frozen_set": True, "reuse_probe_draws": True, "rollouts_early_stop": True}
VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "reuse_frozen_set": {"reuse_frozen_set": True},
    "reuse_both": {"reuse_frozen_set": True, "reuse_probe_draws": True},
    "reuse_gate_answers": {"reuse_gate_answers": True},
    "rollouts_early_stop": {"rollouts_early_stop": True},
    "all": ALL_THREE,
    "since_last_round": {"audit_schedule": "since_last_round"},
    "all_and_since_last_round": {**ALL_THREE, "audit_schedule": "since_last_round"},
    # Not an option but smaller sizes (docs/cost.md, "What reaches 1.5×"): SkillOpt runs with the same splits.
    "smaller_sizes": {"audit_schedule": "since_last_round", "audit_every": 10, "max_stalls": 5, "rollouts": 4,
                      "splits": {"probe": 6, "generator_gate": 10}},
}


def _cell(data: Path, tmp: Path, method: str, seed: int, variant: dict[str, Any]) -> dict[str, Any]:
    hyper = {k: v for k, v in variant.items() if k != "splits"}
    config = config_from_dict(deep_merge(PRESETS["paper"], {
        "method": method, "seed": seed, "data": {"path": str(data), "format": "jsonl"}, "hyper": hyper,
        "splits": variant.get("splits", {})}))
    tmp.mkdir()
    roles, _ = run_virtual(_run(config, tmp))
    return {"calls": sum(r["calls"] for r in roles.values()), "tokens": sum(r["tokens"] for r in roles.values()),
            "cached": sum(r["cached"] for r in roles.values()),
            "outer_rounds": roles.get("rewrite_generator", {}).get("calls", 0), "roles": roles}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--variants", default=",".join(VARIANTS), help="comma-separated, of: %(default)s")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost_levers.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    variants = {name: VARIANTS[name] for name in args.variants.split(",")}
    out: dict[str, Any] = {"preset": "paper", "seeds": seeds, "skillopt": {}, "decoevo": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data = write_toy_questions(Path(tmp) / "questions.jsonl", 300)
        for seed in seeds:
            out["skillopt"][seed] = _cell(data, Path(tmp) / f"skillopt-{seed}", "skillopt", seed, {})
            for name, variant in variants.items():
                out["decoevo"].setdefault(name, {})[seed] = _cell(data, Path(tmp) / f"{name}-{seed}", "decoevo",
                                                                  seed, variant)
                if "splits" in variant:  # SkillOpt on the same splits
                    out.setdefault("skillopt_same_splits", {}).setdefault(name, {})[seed] = _cell(
                        data, Path(tmp) / f"{name}-skillopt-{seed}", "skillopt", seed, variant)
                print(name, seed, {k: v for k, v in out["decoevo"][name][seed].items() if k != "roles"}, flush=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    print("| DecoEvo variant | " + " | ".join(f"seed {s} calls ÷ | seed {s} tokens ÷ | rounds" for s in seeds)
          + " | mean calls ÷ | mean tokens ÷ |")
    print("|---|" + "---:|---:|---:|" * len(seeds) + "---:|---:|")
    for name in variants:
        cells, calls, tokens = [], [], []
        for s in seeds:
            d = out["decoevo"][name][s]
            k = out.get("skillopt_same_splits", {}).get(name, {}).get(s) or out["skillopt"][s]
            calls.append(d["calls"] / k["calls"])
            tokens.append(d["tokens"] / k["tokens"])
            cells.append(f"{calls[-1]:.2f}× | {tokens[-1]:.2f}× | {d['outer_rounds']}")
        print(f"| {name} | " + " | ".join(cells)
              + f" | **{sum(calls) / len(calls):.2f}×** | **{sum(tokens) / len(tokens):.2f}×** |")


if __name__ == "__main__":
    main()
