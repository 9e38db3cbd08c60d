"""The `lean` preset's audit schedule against the `paper` preset's, in worlds of the known-truth world's prior.

For each world of the prior (`decoevo.testing.truth_world_params.PRIOR`, bench/mechanism/prior.py) and each
seed, three runs against the same world truth: SkillOpt, DecoEvo with the `paper` preset's schedule and
DecoEvo with the `lean` preset's. Sizes are the mechanism benches' (bench/mechanism/mechanism.py: SPLITS,
HYPER; the paper's shape scaled down so a cell runs in seconds); a preset's *schedule* is every hyper key of
it that is not a size (steps, batch, token limits, concurrency, rubric size), applied on top: K, M, the
schedule, L, H, the stop rules and the reuse options. SkillOpt runs with the `paper` schedule (it reads
none of its outer-loop keys).

Per world: DecoEvo ÷ SkillOpt tokens for every seed (paper and lean), outer rounds, the gold gain over
SkillOpt (paired by seed, 95% t interval) for both schedules, the loss in gain (lean − paper, paired, 95%
interval) and the non-inferiority verdict: lean's gain is non-inferior to paper's when the interval's
lower end is above −2 points (the margin). Pooled over every (world, seed) pair as well. Results go to
bench/results/cost_lean_schedule.json, rewritten after every world (a stopped bench keeps what it ran).

    nice -n 19 .venv/bin/python -m bench.cost.lean_schedule --worlds 200-205 --seeds 0,1,2
    .venv/bin/python -m bench.cost.lean_schedule --tables        # markdown from the results file
    # after a change to `lean` only its cells run (the others, same world, seed and schedule, are reused):
    nice -n 19 .venv/bin/python -m bench.cost.lean_schedule --reuse bench/results/cost_lean_schedule.json
    # more schedules in the same cells, each compared with paper (the co-evolution budget's curve, docs/cost.md):
    nice -n 19 .venv/bin/python -m bench.cost.lean_schedule --worlds 209-214 --variant share0.25:generator_share=0.25 \
        --variant share0.5:generator_share=0.5 --out bench/results/lean_round7_heldout.json

`--reuse` matches cells by world, seed and schedule only: after a change to the engine, reuse no cell it touches.
Each cell records `outer_tokens`, the tokens paid inside outer rounds (the generator's side).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from bench.mechanism.mechanism import HYPER, SPLITS, commit, run_cell

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from decoevo.analysis.stats import paired_difference  # noqa: E402
from decoevo.presets import PRESETS  # noqa: E402
from decoevo.testing.truth_world import WorldParams  # noqa: E402
from decoevo.testing.truth_world_params import draw_params  # noqa: E402

OUT = RESULTS / "cost_lean_schedule.json"
MARGIN = 2.0  # gold points: the non-inferiority margin on the gain
TARGET = 1.5  # DecoEvo ÷ SkillOpt tokens
SIZES = {"steps", "batch_size", "concurrency", "max_criteria"}  # keys that size a run, not its schedule


VARIANT: dict[str, Any] = {}  # `--lean KEY=VALUE,...`: a variant of lean's schedule to measure (not the preset)
# `--variant NAME:KEY=VALUE,...` (repeatable): more DecoEvo schedules, each lean's with its keys applied, measured
# in the same cells (same world, seed, SkillOpt and paper runs) and compared with paper like lean.
VARIANTS: dict[str, dict[str, Any]] = {}


def schedule(preset: str) -> dict[str, Any]:
    """A preset's schedule: its hyper keys that are not sizes or token limits (lean's with `--lean` applied; a
    `--variant` name: lean's with the variant's keys)."""
    if preset in VARIANTS:
        return {**schedule("lean"), **VARIANTS[preset]}
    keys = {k: v for k, v in PRESETS[preset]["hyper"].items() if k not in SIZES and not k.startswith("max_tokens_")}
    return {**keys, **VARIANT} if preset == "lean" else keys


def labels() -> list[str]:
    """The DecoEvo schedules compared with paper: lean, then the variants."""
    return ["lean", *VARIANTS]


def outer_tokens(run_dir: Path) -> int:
    """Tokens paid inside outer rounds (the generator's side), from the run's call log."""
    path = run_dir / "calls.jsonl"
    if not path.is_file():
        return 0
    total = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        c = json.loads(line)
        if not c.get("cached") and str(c.get("phase", "")).startswith("outer"):
            total += int(c["prompt_tokens"]) + int(c["completion_tokens"])
    return total


def _variant(text: str) -> dict[str, Any]:
    """`rollouts=6,pairs_per_question=3` -> {"rollouts": 6, "pairs_per_question": 3} (values read as JSON)."""
    out: dict[str, Any] = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        out[key.strip()] = json.loads(value)
    return out


def run_world(world: int, seeds: list[int], base: Path,
              earlier: dict[tuple[int, int, str], dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    params = draw_params(world)
    overrides = {k: v for k, v in asdict(params).items() if v != getattr(WorldParams(), k)}
    cells = []
    for seed in seeds:
        work = base / f"w{world}-s{seed}"
        for label, method, preset in (("skillopt", "skillopt", "paper"), ("paper", "decoevo", "paper"),
                                      *((name, "decoevo", name) for name in labels())):
            kept = (earlier or {}).get((world, seed, label))
            if kept is not None and kept.get("hyper") == schedule(preset):  # the same run: a cell is deterministic
                cells.append({**kept, "reused": True})
                continue
            (work / label).mkdir(parents=True, exist_ok=True)
            cell = run_cell(method, seed, overrides, work / label, False, hyper=schedule(preset))
            cell.pop("decisions", None)
            cell.update(world=world, label=label, outer_tokens=outer_tokens(work / label / f"{method}-s{seed}"))
            cells.append(cell)
            print(f"world {world} {label:8s} s{seed} gold {cell['gold']:6.2f} tokens {cell['tokens']:7d} "
                  f"rounds {cell['outer_rounds']}", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    return cells


def _ci(a: dict[Any, float], b: dict[Any, float]) -> dict[str, Any]:
    ci = paired_difference(a, b)
    low = None if ci.ci_low is None else round(ci.ci_low, 2)
    high = None if ci.ci_high is None else round(ci.ci_high, 2)
    return {"mean": round(ci.mean_diff, 2), "ci": [low, high], "n": ci.n}


def _spread(xs: list[float]) -> dict[str, Any]:
    return {"each": [round(x, 2) for x in xs], "min": round(min(xs), 2), "median": round(statistics.median(xs), 2),
            "max": round(max(xs), 2)}


def compare(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Ratios, gains and the non-inferiority verdict for one set of cells (a world, or all of them pooled): lean
    against paper at the top level, every `--variant` likewise under "variants"."""
    names = ["lean", *sorted({c["label"] for c in cells} - {"skillopt", "paper", "lean"})]
    by: dict[str, dict[Any, dict[str, Any]]] = {label: {} for label in ("skillopt", "paper", *names)}
    for c in cells:
        by[c["label"]][(c["world"], c["seed"])] = c
    keys = sorted(set(by["skillopt"]) & set(by["paper"]) & set(by["lean"]))
    base = {k: by["skillopt"][k] for k in keys}
    out: dict[str, Any] = {"pairs": len(keys)}

    def one(label: str, ks: list[Any]) -> dict[str, Any]:
        ratios = [by[label][k]["tokens"] / base[k]["tokens"] for k in ks]
        # the ratio's two factors, where the cell recorded its outer rounds' tokens: the solver loop (every inner
        # step, what follows an accepted generator included) ÷ SkillOpt's run, and the generator's side ÷ that loop
        cs = [(by[label][k], base[k]["tokens"]) for k in ks if "outer_tokens" in by[label][k]]
        split = [(c["tokens"] - c["outer_tokens"], c["outer_tokens"], sk) for c, sk in cs]
        factors = ({"loop_ratio": _spread([loop / sk for loop, _, sk in split]),
                    "generator_per_loop": _spread([outer / loop for loop, outer, _ in split])} if split else {})
        return {**factors, "tokens_ratio": _spread(ratios),
                "outer_rounds": [by[label][k]["outer_rounds"] for k in ks],
                "generator_accepts": [by[label][k]["generator_accepts"] for k in ks],
                "gain": _ci({k: by[label][k]["gold"] for k in ks}, {k: base[k]["gold"] for k in ks}),
                "within_target": sum(1 for r in ratios if r <= TARGET)}

    def against_paper(label: str, ks: list[Any]) -> tuple[dict[str, Any], bool | None]:
        loss = _ci({k: by[label][k]["gold"] for k in ks}, {k: by["paper"][k]["gold"] for k in ks})
        low = loss["ci"][0]
        return loss, (None if low is None else low > -MARGIN)

    for label in ("paper", "lean"):
        out[label] = one(label, keys)
    out["lean_minus_paper"], out["non_inferior"] = against_paper("lean", keys)
    out["lean_ratio_median_within_target"] = out["lean"]["tokens_ratio"]["median"] <= TARGET
    variants = {}
    for name in names[1:]:
        ks = [k for k in keys if k in by[name]]
        if ks:
            v = one(name, ks)
            v["minus_paper"], v["non_inferior"] = against_paper(name, ks)
            variants[name] = v
    if variants:
        out["variants"] = variants
    return out


def summarise(cells: list[dict[str, Any]]) -> dict[str, Any]:
    worlds = sorted({c["world"] for c in cells})
    return {"worlds": {str(w): compare([c for c in cells if c["world"] == w]) for w in worlds},
            "pooled": compare(cells)}


def _cell(x: dict[str, Any]) -> str:
    lo, hi = x["ci"]
    return f"{x['mean']:+.1f}" + ("" if lo is None else f" [{lo:+.1f}, {hi:+.1f}]")


def tables(results: dict[str, Any]) -> str:
    head = ("| world | paper ÷ SkillOpt tokens (each seed; min/median/max) | lean ÷ SkillOpt | rounds paper → lean "
            "| gain paper (95% CI) | gain lean | lean − paper | non-inferior (−2) |\n"
            "|---|---|---|---|---:|---:|---:|---|")
    rows = []
    summary = results["summary"]
    for name, r in [*summary["worlds"].items(), ("pooled", summary["pooled"])]:
        p, lean = r["paper"], r["lean"]

        def ratios(x: dict[str, Any]) -> str:
            t = x["tokens_ratio"]
            each = ", ".join(f"{v:.2f}" for v in t["each"]) if len(t["each"]) <= 5 else f"{len(t['each'])} pairs"
            return f"{each} ({t['min']:.2f}/{t['median']:.2f}/{t['max']:.2f})"

        rounds = (f"{statistics.fmean(p['outer_rounds']):.1f} → {statistics.fmean(lean['outer_rounds']):.1f}")
        verdict = {True: "yes", False: "**no**", None: "n/a"}[r["non_inferior"]]
        rows.append(f"| {name} | {ratios(p)} | {ratios(lean)} | {rounds} | {_cell(p['gain'])} | {_cell(lean['gain'])} "
                    f"| {_cell(r['lean_minus_paper'])} | {verdict} |")
    return "\n".join([head, *rows, "", curve(results)])


def curve(results: dict[str, Any]) -> str:
    """Every schedule pooled, and per world: cost ratio against the loss in gain (the trade-off)."""
    head = ("| schedule | worlds | tokens ÷ SkillOpt (min/median/max) | runs ≤ 1.5× "
            "| loop ÷ SkillOpt, generator ÷ loop (medians) | gain over SkillOpt (95% CI) | − paper (95% CI) "
            "| non-inferior (−2) |\n"
            "|---|---|---|---:|---|---:|---:|---|")
    rows = []
    summary = results["summary"]
    for name, r in [("pooled", summary["pooled"]), *summary["worlds"].items()]:
        schedules = [("paper", r["paper"], None, None), ("lean", r["lean"], r["lean_minus_paper"], r["non_inferior"]),
                     *((k, v, v["minus_paper"], v["non_inferior"]) for k, v in r.get("variants", {}).items())]
        for label, x, loss, verdict in schedules:
            t = x["tokens_ratio"]
            factors = (f"{x['loop_ratio']['median']:.2f}, {x['generator_per_loop']['median']:.2f}"
                       if "loop_ratio" in x else "—")
            rows.append(f"| {label} | {name} | {t['min']:.2f}/{t['median']:.2f}/{t['max']:.2f} "
                        f"| {x['within_target']} of {len(t['each'])} | {factors} | {_cell(x['gain'])} "
                        f"| {'—' if loss is None else _cell(loss)} "
                        f"| {'—' if loss is None else {True: 'yes', False: '**no**', None: 'n/a'}[verdict]} |")
    return "\n".join([head, *rows])


def _range(text: str) -> list[int]:
    if "-" in text:
        a, b = text.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(x) for x in text.split(",") if x]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worlds", default="200-205")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--tables", action="store_true", help="print the markdown tables of the results file")
    ap.add_argument("--reuse", type=Path, help="take cells from this earlier results file where it ran the same "
                    "world, seed and schedule (a cell is deterministic): after a change to `lean`, only its cells run")
    ap.add_argument("--lean", default="", help="measure a variant of lean's schedule: KEY=VALUE,... (use --out)")
    ap.add_argument("--variant", action="append", default=[], help="NAME:KEY=VALUE,... another schedule (lean's "
                    "with these keys) run in the same cells and compared with paper; repeatable")
    args = ap.parse_args(argv)
    VARIANT.update(_variant(args.lean))
    for text in args.variant:
        name, _, keys = text.partition(":")
        VARIANTS[name.strip()] = _variant(keys)
    if args.tables:
        print(tables(json.loads(args.out.read_text(encoding="utf-8"))))
        return 0
    worlds, seeds = _range(args.worlds), [int(s) for s in args.seeds.split(",")]
    cells: list[dict[str, Any]] = []
    earlier = {(c["world"], c["seed"], c["label"]): c
               for c in json.loads(args.reuse.read_text(encoding="utf-8"))["cells"]} if args.reuse else None
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="decoevo-lean-") as tmp:
        for world in worlds:
            cells += run_world(world, seeds, Path(tmp), earlier)
            results = {"bench": "cost_lean_schedule", "machine": machine(), "commit": commit(),
                       "worlds": sorted({c["world"] for c in cells}), "planned_worlds": worlds, "seeds": seeds,
                       "splits": SPLITS, "hyper": HYPER, "schedules": {p: schedule(p) for p in ("paper", *labels())},
                       "margin": MARGIN, "target": TARGET, "wall_s": round(time.time() - started, 1),
                       "summary": summarise(cells), "cells": cells}
            args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(tables(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
