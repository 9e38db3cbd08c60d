"""Worlds drawn from a stated prior: where co-evolving the rubric wins, ties and loses against SkillOpt.

The prior is `decoevo.testing.truth_world_params.PRIOR` (each cost knob independently uniform over the
values listed there; the round-one knobs at their defaults). It was written and committed before any
world drawn from it was run, and this bench reports every world it draws, none dropped: world ids are
drawn from the range given (`--worlds`, default 100-111).

For each world, each seed is one paired comparison: SkillOpt, DecoEvo and SC-CoEvo run against the same
world truth (the seed draws the requirements' names and weights, and the run). Per world: gold (mean ±
sd), paid calls and tokens per run, the paired difference DecoEvo − SkillOpt (and SC-CoEvo − SkillOpt)
with its 95% t interval and two-sided paired t p-value, Holm-corrected over the worlds of one invocation
(one family per comparison), and the world's headroom: the best expected gold any strategy naming real
requirements reaches in it, minus the initial strategy's. A world is a win (loss) only when the Holm-
corrected test rejects and the mean difference is positive (negative); every other world is a tie.

    nice -n 10 .venv/bin/python -m bench.mechanism.prior                 # 12 worlds x 20 seeds x 3 methods
    .venv/bin/python -m bench.mechanism.prior --tables                   # markdown tables from the results file
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from bench.mechanism.mechanism import HYPER, SPLITS, commit, run_cell

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from decoevo.analysis.stats import holm, paired_difference  # noqa: E402
from decoevo.testing.truth_world import TruthWorld, WorldParams, render_skill  # noqa: E402
from decoevo.testing.truth_world_params import PRIOR, draw_params  # noqa: E402

METHODS = ("skillopt", "decoevo", "sc_coevo")
COMPARISONS = (("decoevo", "skillopt"), ("sc_coevo", "skillopt"))
OUT = RESULTS / "mechanism_prior.json"


def best_expected_gold(world: TruthWorld) -> float:
    """The highest expected gold (0-100) of a strategy naming k real requirements, over every k: for each
    k the k requirements that gain most from being named (weight times follow rate minus chance)."""
    p, best = world.params, 0.0
    chance = {"contrast": p.contrast_spontaneous, "hidden": 0.0}
    for k in range(1, len(world.requirements) + 1):
        rate = world.follow_rate(k)
        ranked = sorted(world.requirements, key=lambda r: -r.weight * (rate - chance.get(r.kind, p.spontaneous)))
        text = render_skill("Cover these.", [r.tag for r in ranked[:k]], world.name)
        best = max(best, 100 * world.expected_gold(text))
    return best


def knobs(params: WorldParams) -> dict[str, Any]:
    """The prior's knobs of a drawn world (the rest are the defaults)."""
    values = asdict(params)
    return {k: values[k] for k in PRIOR if k in {f.name for f in fields(WorldParams)}}


def run_world(world_id: int, seeds: list[int], base: Path) -> list[dict[str, Any]]:
    params = draw_params(world_id)
    overrides = {k: v for k, v in asdict(params).items() if v != getattr(WorldParams(), k)}
    cells = []
    for seed in seeds:
        work = base / f"w{world_id}-s{seed}"
        work.mkdir(parents=True, exist_ok=True)
        truth = TruthWorld(params, seed=seed)
        best, start = best_expected_gold(truth), 100 * truth.expected_gold("")
        for method in METHODS:
            cell = run_cell(method, seed, overrides, work, False)
            cell.pop("decisions", None)
            cell.update(world=world_id, best_expected_gold=round(best, 2), headroom=round(best - start, 2))
            cells.append(cell)
            print(f"world {world_id} {method:9s} s{seed:<3d} gold {cell['gold']:6.2f} calls {cell['calls']:5d} "
                  f"cpu {cell['cpu_s']:5.2f}s", flush=True)
    return cells


def _mean(xs: list[float]) -> float:
    return round(statistics.fmean(xs), 2)


def summarise(cells: list[dict[str, Any]]) -> dict[str, Any]:
    worlds = sorted({c["world"] for c in cells})
    rows: dict[int, dict[str, Any]] = {}
    for w in worlds:
        mine = [c for c in cells if c["world"] == w]
        by = {m: {c["seed"]: c for c in mine if c["method"] == m} for m in METHODS}
        row: dict[str, Any] = {"knobs": knobs(draw_params(w)), "n_seeds": len(by["skillopt"]),
                               "headroom": _mean([c["headroom"] for c in by["skillopt"].values()]),
                               "best_expected_gold": _mean([c["best_expected_gold"] for c in by["skillopt"].values()])}
        for m in METHODS:
            gold = [c["gold"] for c in by[m].values()]
            row[m] = {"gold": _mean(gold), "sd": round(statistics.stdev(gold), 2) if len(gold) > 1 else 0.0,
                      "calls": _mean([c["calls"] for c in by[m].values()]),
                      "tokens": _mean([c["tokens"] for c in by[m].values()])}
        for a, b in COMPARISONS:
            ci = paired_difference({s: c["gold"] for s, c in by[a].items()}, {s: c["gold"] for s, c in by[b].items()})
            row[f"{a}-{b}"] = {"mean": round(ci.mean_diff, 2), "ci": [_r(ci.ci_low), _r(ci.ci_high)],
                               "p": ci.p_value, "calls_ratio": round(row[a]["calls"] / row[b]["calls"], 2)}
        rows[w] = row
    shares: dict[str, Any] = {}
    for a, b in COMPARISONS:
        key = f"{a}-{b}"
        corrected = holm({w: 1.0 if rows[w][key]["p"] is None else rows[w][key]["p"] for w in worlds})
        for w in worlds:
            d = rows[w][key]
            d["p_holm"] = corrected[w].adjusted
            d["verdict"] = ("win" if d["mean"] > 0 else "loss") if corrected[w].reject else "tie"
        verdicts = [rows[w][key]["verdict"] for w in worlds]
        shares[key] = {v: verdicts.count(v) for v in ("win", "tie", "loss")} | {"worlds": len(worlds)}
    return {"worlds": {str(w): r for w, r in rows.items()}, "shares": shares, "knob_association": association(rows)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def association(rows: dict[int, dict[str, Any]]) -> dict[str, float | None]:
    """Spearman's ρ, over the drawn worlds, between each knob (and the headroom) and DecoEvo − SkillOpt:
    which assumptions decide the result in this prior."""
    from scipy.stats import spearmanr

    worlds = sorted(rows)
    diff = [rows[w]["decoevo-skillopt"]["mean"] for w in worlds]
    out: dict[str, float | None] = {}
    for name in [*PRIOR, "headroom"]:
        xs = [rows[w]["headroom"] if name == "headroom" else rows[w]["knobs"][name] for w in worlds]
        if name == "capacity":  # 0 means no limit: the most capacity there is
            xs = [x or 99 for x in xs]
        out[name] = None if len(set(xs)) < 2 or len(worlds) < 3 else round(float(spearmanr(xs, diff)[0]), 2)
    return out


SHORT = {"capacity": "cap", "length_cost": "len", "solver_forget": "forget", "n_style": "style",
         "vague_criteria": "vague", "spec_decoys": "spec decoys", "spec_vague": "spec vague",
         "question_share": "q share", "generator_rewrite_soften": "soften", "pref_accuracy": "pref acc"}


def tables(results: dict[str, Any]) -> str:
    s = results["summary"]
    out = ["| world | knobs off the default | SkillOpt | DecoEvo | SC-CoEvo | DecoEvo − SkillOpt [95% CI] | "
           "Holm p | verdict | SC-CoEvo − SkillOpt (Holm p, verdict) | DecoEvo calls ÷ SkillOpt | headroom |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    default = asdict(WorldParams())
    for w, row in s["worlds"].items():
        off = ", ".join(f"{SHORT[k]} {v}" for k, v in row["knobs"].items() if v != default[k]) or "none"
        d, sc = row["decoevo-skillopt"], row["sc_coevo-skillopt"]
        gold = [f"{row[m]['gold']:.1f} ± {row[m]['sd']:.1f}" for m in METHODS]
        ci = "–" if d["ci"][0] is None else f"[{d['ci'][0]:+.1f}, {d['ci'][1]:+.1f}]"
        out.append(f"| {w} | {off} | {' | '.join(gold)} | {d['mean']:+.1f} {ci} | {_pfmt(d['p_holm'])} | "
                   f"{d['verdict']} | "
                   f"{sc['mean']:+.1f} ({_pfmt(sc['p_holm'])}, {sc['verdict']}) | {d['calls_ratio']:.2f} | "
                   f"{row['headroom']:.1f} |")
    out += ["", "| comparison | wins | ties | losses | worlds |", "|---|---|---|---|---|"]
    for key, sh in s["shares"].items():
        out.append(f"| {key.replace('-', ' − ')} | {sh['win']} | {sh['tie']} | {sh['loss']} | {sh['worlds']} |")
    out += ["", "| knob | Spearman ρ with DecoEvo − SkillOpt over the worlds |", "|---|---|"]
    for k, rho in s["knob_association"].items():
        out.append(f"| {k} | {'–' if rho is None else f'{rho:+.2f}'} |")
    return "\n".join(out) + "\n"


def _pfmt(p: float) -> str:
    return "<1e-4" if p < 1e-4 else f"{p:.2g}"


def _range(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", default="100-111", help="world ids of the prior (a-b or a,b,c)")
    parser.add_argument("--seeds", default="0-19")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--tables", action="store_true", help="print the markdown tables of --out and exit")
    parser.add_argument("--resummarise", action="store_true", help="recompute the summary of --out from its cells")
    args = parser.parse_args()
    if args.resummarise:
        results = json.loads(Path(args.out).read_text(encoding="utf-8"))
        results["summary"] = summarise(results["cells"])
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        return
    if args.tables:
        print(tables(json.loads(Path(args.out).read_text(encoding="utf-8"))))
        return
    worlds, seeds = _range(args.worlds), _range(args.seeds)
    started, cpu0, at = time.time(), time.process_time(), commit()
    cells: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for w in worlds:
            cells += run_world(w, seeds, Path(tmp))
    timing = {"wall_s": round(time.time() - started, 1), "cpu_s": round(time.process_time() - cpu0, 1),
              "cells": len(cells), "commit": at}
    out = {"bench": "mechanism_prior", "machine": machine(), "worlds": worlds, "seeds": seeds, "splits": SPLITS,
           "hyper": HYPER, "prior": {k: list(v) for k, v in PRIOR.items()}, "run": timing,
           "summary": summarise(cells), "cells": cells}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({len(cells)} cells, {timing['wall_s']} s wall, {timing['cpu_s']} s CPU)")


if __name__ == "__main__":
    main()
