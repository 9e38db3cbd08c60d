"""Compute parity of the controls as `decoevo reproduce` runs them, in several simulated worlds.

`reproduce` tops SC-CoEvo and Direct Audit up to, and caps Budget-Matched at, the paired DecoEvo run's
tokens (`decoevo.sweep.spec.at_token_parity`, the rule `reproduce` and `sweep --parity` apply). This
bench builds the HealthBench sweep's cells by that rule (`reproduce`'s Table 4 methods plus SkillOpt, at
reproduce_sim.py's sizes: `quick`, T = 6, 40 questions) and runs them in process on the simulator, one
request cache per world and seed as one seed's sweep shares it, in the cost benches' ten worlds
(bench/cost/cost_worlds.py: the default and held-out worlds, each with a family of four). Measured: each
control's effective tokens ÷ its paired DecoEvo run's, per world and seed, with min/median/max per control.

    .venv/bin/python -m bench.reproduce.parity_worlds --seeds 0,1,2,3,4    # under a minute on 2 cores
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from bench.cost.cost_worlds import CHECK, SELECTION, world
from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.lm import LM, RequestCache
from decoevo.sweep.plan import plan
from decoevo.sweep.spec import SweepSpec, at_token_parity
from decoevo.testing.sim_backend import SimBackend, run_virtual
from decoevo.testing.sim_model import LatencyModel
from decoevo.testing.toy_server import write_toy_questions

METHODS = ["skillopt", "decoevo", "sc_coevo", "direct_audit", "budget_matched"]
CONTROLS = ("sc_coevo", "direct_audit", "budget_matched")
WORLDS = [*SELECTION, *CHECK]  # the cost benches' ten: default and held-out, each with a family of four


def one_seed(args: tuple[str, int, int, int, str]) -> dict[str, Any]:
    """The cells of one world and seed, in plan order (DecoEvo before the controls matched to it)."""
    wname, seed, questions, steps, preset = args
    sim_world, sim_seed = world(wname)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = write_toy_questions(root / "healthbench.jsonl", questions)
        raw = at_token_parity({"methods": METHODS, "seeds": [seed], "preset": preset, "evaluate": [],
                               "benchmarks": [{"name": "healthbench", "data": str(data), "format": "jsonl"}],
                               "splits": {"diagnostic": 4, "test": 10}, "hyper": {"steps": steps}}, "bench")
        spec = SweepSpec.model_validate(raw)
        cache = RequestCache(root / "cache.sqlite")
        tokens: dict[str, int] = {}
        steps_taken: dict[str, int] = {}
        for cell in plan(spec, root / "SW"):
            backend = SimBackend(sim_seed, LatencyModel.fixed(1.0), 64, world=sim_world)
            config = config_from_dict(cell.config)
            lm = LM(config.lm, backends={"default": backend}, cache=cache)
            result, _ = run_virtual(Engine(config, cell.run_dir(root / "SW"), lm=lm).run_async())
            tokens[cell.method] = result.ledger.total().effective_tokens
            steps_taken[cell.method] = result.state.next_step
    ratios = {m: round(tokens[m] / tokens["decoevo"], 4) for m in CONTROLS}
    return {"world": wname, "seed": seed, "ratios": ratios, "decoevo_tokens": tokens["decoevo"],
            "steps": steps_taken}


def spread(values: list[float]) -> dict[str, float]:
    return {"min": min(values), "median": round(statistics.median(values), 4), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--worlds", default=",".join(WORLDS))
    parser.add_argument("--questions", type=int, default=40)
    parser.add_argument("--steps", type=int, default=6, help="inner steps T (reproduce_sim.py's)")
    parser.add_argument("--preset", default="quick", help="quick (reproduce_sim.py's) or paper")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS / "parity_worlds.json")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    tasks = [(w, s, args.questions, args.steps, args.preset) for w in args.worlds.split(",") for s in seeds]
    t0 = time.monotonic()
    with ProcessPoolExecutor(args.workers) as pool:
        rows = list(pool.map(one_seed, tasks, chunksize=1))
    by_control = {m: [r["ratios"][m] for r in rows] for m in CONTROLS}
    result = {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "sizes": f"{args.preset}, hyper.steps={args.steps}, {args.questions} questions, "
                 "splits.diagnostic=4, splits.test=10",
        "rule": "decoevo.sweep.spec.at_token_parity (what reproduce and sweep --parity apply)",
        "seeds": seeds,
        "worlds": args.worlds.split(","),
        "wall_s": round(time.monotonic() - t0, 1),
        "tokens_vs_decoevo": {m: spread(v) for m, v in by_control.items()},
        "within_5_percent": {m: sum(abs(x - 1) <= 0.05 for x in v) for m, v in by_control.items()},
        "runs_per_control": len(rows),
        "rows": rows,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}, indent=2))


if __name__ == "__main__":
    main()
