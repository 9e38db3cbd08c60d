"""DecoEvo's calls and tokens relative to SkillOpt at the same number of steps, on the embedded model.

Both methods run with the same seed, splits and hyperparameters, each with its own fresh request
cache (so one cannot ride on the other's answers; caching within a run counts, as it would for a
user). Paid calls and tokens come from each run's ledger.

    .venv/bin/python -m bench.cost.cost_ratio                      # the numbers in docs/performance.md
    .venv/bin/python -m bench.cost.cost_ratio --steps 4 --audit-every 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path

from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.presets import PRESETS, bundled_healthbench


def run_method(method: str, args: argparse.Namespace, workdir: Path) -> dict[str, object]:
    hyper = {**PRESETS["quick"]["hyper"], "steps": args.steps, "audit_every": args.audit_every}
    if args.no_stall_rounds:  # only the K schedule triggers audits (not what users run: docs/cost.md)
        hyper["max_stalls"] = args.steps + 1
    config = config_from_dict({
        "method": method, "seed": args.seed, "hyper": hyper,
        "splits": {"train": 6, "probe": 1, "solver_gate": 2, "generator_gate": 1},
        "data": {"path": bundled_healthbench(), "format": "healthbench"},
    })
    lm = LM(LMConfig(), cache=RequestCache(workdir / f"{method}.sqlite"))
    started = time.monotonic()
    result = asyncio.run(Engine(config, workdir / method, lm=lm).run_async())
    total = result.ledger.total()
    return {
        "method": method, "seconds": round(time.monotonic() - started, 1), "calls": total.calls,
        "cache_hits": total.cache_hits, "tokens": total.tokens, "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens, "outer_rounds": result.state.outer_rounds,
        "failed_steps": result.state.failed_steps,
        "by_role": {role: {"calls": r.calls, "hits": r.cache_hits, "tokens": r.tokens}
                    for role, r in sorted(result.ledger.by_role().items())},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--audit-every", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-stall-rounds", action="store_true",
                        help="turn stall-triggered rounds off, as the figures in docs/cost.md's history were measured")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parents[1] / "results" / "cost_ratio.json")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rows = [run_method(m, args, Path(tmp)) for m in ("skillopt", "decoevo")]
    base, deco = rows
    ratio = {"calls": deco["calls"] / base["calls"], "tokens": deco["tokens"] / base["tokens"]}  # type: ignore[operator]
    report = {"config": vars(args) | {"out": str(args.out)}, "runs": rows, "decoevo_over_skillopt": ratio}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{'method':10} {'calls':>6} {'hits':>6} {'tokens':>8} {'outer':>6} {'sec':>7}")
    for r in rows:
        print(f"{r['method']:10} {r['calls']:>6} {r['cache_hits']:>6} {r['tokens']:>8} {r['outer_rounds']:>6} "
              f"{r['seconds']:>7}")
    print(f"DecoEvo / SkillOpt: calls {ratio['calls']:.2f}x, tokens {ratio['tokens']:.2f}x")


if __name__ == "__main__":
    main()
