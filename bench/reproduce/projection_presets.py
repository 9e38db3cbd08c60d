"""The plan's projection against the bill at the sizes people pay for, the `default` and `paper` presets
(issue 35 item 3), per seed and per phase, in the simulated server's worlds.

For each preset, world and seed: `decoevo reproduce` without `--yes` prints the plan and its projection
(training calls, evaluation calls, dollars) and stops; the same command with `--yes` then runs that seed
alone in a fresh experiment directory (runs of different seeds share nothing), and the bill is what was
paid: the training and per-evaluation ledgers (calls and dollars per phase) and the requests the
simulated server counted during the run. Each cell is appended to the results file as it finishes, so a
cut-short run keeps what it measured. The server runs in its own process with no latency (the bill does
not depend on it). Worlds: those of the simulated reproduce bench (bench/cost/cost_worlds.py).

    nice -n 10 .venv/bin/python -m bench.reproduce.projection_presets --presets default --seeds 0,1,2
    nice -n 10 .venv/bin/python -m bench.reproduce.projection_presets --presets paper --seeds 0,1 --markdown
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from bench._common import RESULTS, machine
from bench.reproduce.reproduce_sim import (
    PRICE,
    invoke,
    ledger_calls,
    ledger_dollars,
    projected,
    spread,
    stats,
    write_questions,
)
from bench.scale.paper_scale import sim_server_process

PHASES = ("training_calls", "evaluation_calls", "dollars")
# The source file must hold every split of the preset (paper: 247 questions with its diagnostic split).
QUESTIONS = {"default": 40, "paper": 260}


def _run_calls(run: Path) -> dict[str, int]:
    """One run's paid calls per phase, from its training ledger and its per-evaluation ledgers."""
    train = json.loads((run / "ledger.json").read_text())["total"]["calls"] if (run / "ledger.json").is_file() else 0
    return {"training_calls": train,
            "evaluation_calls": sum(json.loads(p.read_text())["total"]["calls"]
                                    for p in run.glob("eval/ledger-*.json"))}


def measure(preset: str, world_name: str, seed: int, root: Path, tables: str, transfer: int,
            sets: list[str]) -> dict[str, Any]:
    """One (preset, world, seed) cell: the projection printed before spending, then the bill."""
    from bench.cost.cost_worlds import world

    sim_world, sim_seed = world(world_name)
    cell = root / f"{preset}-{world_name}-s{seed}"
    cell.mkdir(parents=True)
    data = ["--data", f"healthbench={write_questions(cell / 'hb.jsonl', 'healthbench', QUESTIONS[preset])}:jsonl",
            "--data", f"llmeval_med={write_questions(cell / 'med.jsonl', 'llmeval_med', transfer)}:jsonl"]
    server = {"sim_seed": sim_seed, "slots": 64, "latency": {"base_s": 0.0, "per_token_s": 0.0, "tail_p": 0.0},
              "world": dataclasses.asdict(sim_world) if sim_world is not None else None}
    extra = ("--benchmarks", "healthbench", "--tables", tables)
    with sim_server_process(server) as url:
        models = cell / "models.yaml"
        models.write_text(yaml.safe_dump({
            "solver": {"backend": "openai", "model": "sim-backbone", "base_url": f"{url}/v1", **PRICE},
            "grader": {"backend": "openai", "model": "sim-grader", "base_url": f"{url}/v1", **PRICE}}))
        out = cell / "experiment"
        _, plan_text, _ = invoke(out, models, data, str(seed), sets, yes=False, preset=preset, extra=extra)
        plan = projected(plan_text)
        if plan is None:
            raise RuntimeError(f"no projection printed ({preset}, {world_name}, seed {seed}):\n{plan_text[-3000:]}")
        before = stats(url)["requests"]
        wall, text, code = invoke(out, models, data, str(seed), sets, preset=preset, extra=extra)
        requests = stats(url)["requests"] - before
    (t_calls, e_calls), (t_usd, e_usd) = ledger_calls(out), ledger_dollars(out)
    paid = {"training_calls": t_calls, "evaluation_calls": e_calls, "dollars": round(t_usd + e_usd, 4),
            "dollars_training": round(t_usd, 4), "dollars_evaluation": round(e_usd, 4)}
    runs = len(list(out.glob("sweeps/*/runs/*/*/summary.json")))
    per_run = {f"{r.parent.name}/{r.name}": _run_calls(r)
               for r in out.glob("sweeps/*/runs/*/*") if r.is_dir()}
    if code != 0:
        print(text[-3000:])
    shutil.rmtree(cell, ignore_errors=True)
    return {"preset": preset, "world": world_name, "seed": seed, "exit_code": code, "wall_s": round(wall, 1),
            "runs": runs, "projected": plan,
            "plan_text": plan_text[-2500:], "per_run_paid": per_run, "paid": paid, "server_requests": requests,
            "ratio": {k: round(plan[k] / paid[k], 3) if paid[k] else None for k in PHASES}}


def summarize(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Per preset: the projected ÷ paid ratio per phase, min / median / max over every (world, seed)."""
    out: dict[str, Any] = {}
    for preset in sorted({c["preset"] for c in cells}):
        mine = [c for c in cells if c["preset"] == preset and c["exit_code"] == 0]
        out[preset] = {"cells": len(mine), **{k: spread([c["ratio"][k] for c in mine if c["ratio"][k]])
                                              for k in PHASES}}
    return out


def _cell(projected_: float, paid: float, money: bool) -> str:
    fmt = (lambda x: f"${x:,.2f}") if money else (lambda x: f"{x:,.0f}")
    return f"{fmt(projected_)} / {fmt(paid)} ({projected_ / paid:.2f})" if paid else f"{fmt(projected_)} / 0"


def markdown(result: dict[str, Any]) -> str:
    lines = ["| preset | world | seed | runs | training calls: projected / paid (÷) | evaluation calls | dollars "
             "| server requests |", "|---|---|---|---|---|---|---|---|"]
    for c in result["cells"]:
        p, a = c["projected"], c["paid"]
        lines.append(f"| {c['preset']} | {c['world']} | {c['seed']} | {c['runs']} | "
                     + " | ".join(_cell(p[k], a[k], k == "dollars") for k in PHASES)
                     + f" | {c['server_requests']:,} |")
    for preset, s in result["spread"].items():
        mine = [c for c in result["cells"] if c["preset"] == preset and c["exit_code"] == 0]
        plan = {k: sum(c["projected"][k] for c in mine) for k in PHASES}
        paid = {k: sum(c["paid"][k] for c in mine) for k in PHASES}
        lines.append(f"| {preset} | all {s['cells']} | sum | | "
                     + " | ".join(_cell(plan[k], paid[k], k == "dollars") for k in PHASES)
                     + f" | {sum(c['server_requests'] for c in mine):,} |")
        lines.append(f"| {preset} | per seed ({s['cells']}) | ÷ min / median / max | | "
                     + " | ".join(f"{s[k]['min']:.2f} / {s[k]['median']:.2f} / {s[k]['max']:.2f}" if s[k] else ""
                                  for k in PHASES) + " | |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--presets", default="default,paper")
    parser.add_argument("--worlds", default="default,held_out,f2w1")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--tables", default="1", help="reproduce's --tables (on HealthBench)")
    parser.add_argument("--transfer-questions", type=int, default=8, help="the LLMEval-Med transfer's questions")
    parser.add_argument("--set", action="append", default=[], dest="sets", help="passed to reproduce (key=value)")
    parser.add_argument("--out", type=Path, default=RESULTS / "projection_presets.json")
    parser.add_argument("--append", action="store_true", help="keep the cells already in --out")
    parser.add_argument("--markdown", action="store_true", help="print the table of --out and stop")
    args = parser.parse_args()
    if args.markdown:
        print(markdown(json.loads(args.out.read_text())))
        return
    result: dict[str, Any] = json.loads(args.out.read_text()) if args.append and args.out.is_file() else {
        "machine": machine(), "cells": []}
    result.update({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                   "command": f"decoevo reproduce --preset P --benchmarks healthbench --tables {args.tables} "
                              f"{''.join('--set ' + s + ' ' for s in args.sets)}--seeds S (one seed per experiment), "
                              f"HealthBench-format JSONL ({QUESTIONS}) + an LLMEval-Med transfer of "
                              f"{args.transfer_questions} questions, priced $2.50 / $10 per million tokens"})
    with tempfile.TemporaryDirectory(prefix="projpre-") as tmp:
        for preset in args.presets.split(","):
            for world_name in args.worlds.split(","):
                for seed in (int(s) for s in args.seeds.split(",")):
                    cell = measure(preset, world_name, seed, Path(tmp), args.tables, args.transfer_questions,
                                   args.sets)
                    result["cells"].append(cell)
                    result["spread"] = summarize(result["cells"])
                    args.out.write_text(json.dumps(result, indent=2) + "\n")
                    print(json.dumps({k: cell[k] for k in ("preset", "world", "seed", "wall_s", "runs", "ratio")}),
                          flush=True)
    print(markdown(result))


if __name__ == "__main__":
    main()
