"""Worlds drawn from a stated prior: where co-evolving the rubric wins, ties and loses against SkillOpt.

The prior is `decoevo.testing.truth_world_params.PRIOR` (the requirement mix, the auditors and the cost
knobs, each independently uniform over the values listed there; the other knobs at their defaults). It
was written and committed before any world drawn from it was run, and this bench reports every world it
draws, none dropped: world ids are drawn from the range given (`--worlds`, default 200-223).

Besides gold, each DecoEvo cell records two gold-free readings of its own run, so that they can be
measured as classifiers of the outcome over the prior's worlds: the criterion-drift flags of its
`summary.json` (`analysis/criterion_drift.py`), and what its first outer round's audits found on the
probe set (mean structural adequacy, decided contrastive pairs, distinct repairs and principles).

For each world, each seed is one paired comparison: the methods of `--methods` run against the same world
truth (the seed draws the requirements' names and weights, and the run). The bench can run three,
SkillOpt, DecoEvo and SC-CoEvo (the default); the stored results, bench/results/mechanism_prior.json, hold
two, SkillOpt and DecoEvo (run with `--methods skillopt,decoevo`, as docs/mechanism.md says; SC-CoEvo's
column and its comparison appear only in a file that holds its cells). Per world: gold (mean ± sd), paid
calls and tokens per run, the paired difference DecoEvo − SkillOpt (and SC-CoEvo − SkillOpt where run)
with its two-sided paired t p-value, Holm-corrected over the worlds of one invocation (one family per
comparison), the interval at the confidence Holm tests the world at, and the world's headroom: the best
expected gold any strategy naming real requirements reaches in it, minus the initial strategy's. The
verdict is read from that interval (bench/mechanism/verdicts.py): a win above 0, a loss below, a tie
across it; it excludes 0 exactly when the Holm-corrected test rejects.

    nice -n 10 .venv/bin/python -m bench.mechanism.prior --methods skillopt,decoevo --resume  # the stored run
    nice -n 19 .venv/bin/python -m bench.mechanism.prior --prior transfer --methods skillopt,decoevo --seeds 0-9
        # the second prior (PRIOR_TRANSFER, worlds 500-523) the advice is tested on: mechanism_prior_transfer.json
    nice -n 10 .venv/bin/python -m bench.mechanism.prior                 # 24 worlds x 20 seeds x 3 methods
    .venv/bin/python -m bench.mechanism.prior --tables                   # markdown tables from the results file
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from bench.mechanism.mechanism import HYPER, SPLITS, commit, run_cell
from bench.mechanism.verdicts import decide, family

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from decoevo.analysis.criterion_drift import run_drift  # noqa: E402
from decoevo.analysis.stats import paired_difference  # noqa: E402
from decoevo.testing.truth_world import TAG, TruthWorld, WorldParams, render_skill  # noqa: E402
from decoevo.testing.truth_world_params import PRIOR, PRIOR_TRANSFER, draw_params, draw_split  # noqa: E402

METHODS = ("skillopt", "decoevo", "sc_coevo")
COMPARISONS = (("decoevo", "skillopt"), ("sc_coevo", "skillopt"))
OUT = RESULTS / "mechanism_prior.json"
WORLDS = "200-223"
TRANSFER_WORLDS = "500-523"  # ids no earlier run of either prior used (200-223, 300-323 and 400-411 were)
# `--prior transfer` draws from the second prior (issue 48), into its own results file.
PRIORS: dict[str, dict[str, tuple[Any, ...]]] = {"one": PRIOR, "transfer": PRIOR_TRANSFER}
TRANSFER_OUT = RESULTS / "mechanism_prior_transfer.json"


def best_expected_gold(world: TruthWorld, findable: bool = False) -> float:
    """The highest expected gold (0-100) of a strategy naming k real requirements, over every k: for each
    k the k requirements that gain most from being named (weight times follow rate minus chance). With
    `findable`, only requirements the initial generator or an audit can name (not hidden ones)."""
    p, best = world.params, 0.0
    chance = {"contrast": p.contrast_spontaneous, "local": p.contrast_spontaneous, "hidden": 0.0}
    pool = [r for r in world.requirements if not (findable and r.kind == "hidden")]
    for k in range(1, len(pool) + 1):
        rate = world.follow_rate(k)
        ranked = sorted(pool, key=lambda r: -r.weight * (rate - chance.get(r.kind, p.spontaneous)))
        text = render_skill("Cover these.", [r.tag for r in ranked[:k]], world.name)
        best = max(best, 100 * world.expected_gold(text))
    return best


def knobs(params: WorldParams, prior: dict[str, tuple[Any, ...]] | None = None) -> dict[str, Any]:
    """The prior's knobs of a drawn world (the rest are the defaults)."""
    values = asdict(params)
    return {k: values[k] for k in (PRIOR if prior is None else prior) if k in {f.name for f in fields(WorldParams)}}


def world_knobs(world_id: int, prior: dict[str, tuple[Any, ...]]) -> dict[str, Any]:
    """Every knob `prior` draws for a world: its `WorldParams` knobs and its split sizes."""
    return knobs(draw_params(world_id, prior=prior), prior) | draw_split(world_id, prior)


def first_round_audits(run_dir: Path, initial_generator: str) -> dict[str, Any]:
    """What the first outer round's audits found on the probe set, read from the run directory (no gold):
    mean structural adequacy (0-1), decided contrastive pairs, the distinct repairs and principles, and the
    distinct items (tags) each audit proposes that the initial generator does not name, rewarded or not."""
    folder = run_dir / "audits" / "outer_000"
    if not folder.is_dir():
        return {"rounds": 0}

    def rows(name: str) -> list[dict[str, Any]]:
        path = folder / name
        return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()] \
            if path.is_file() else []

    structural, contrastive = rows("structural_probe.jsonl"), rows("contrastive_probe.jsonl")
    known = set(TAG.findall(initial_generator))

    def new(texts: list[str]) -> int:
        return len({t for x in texts for t in TAG.findall(x)} - known)

    return {"rounds": 1, "new_structural": new([r["repair"] for r in structural]),
            "new_contrastive": new([r["principle"] for r in contrastive]),
            "adequacy": round(statistics.fmean(r["adequacy"] for r in structural), 4) if structural else None,
            "structural_records": len(structural), "contrastive_records": len(contrastive),
            "repairs": len({r["repair"] for r in structural}),
            "principles": len({r["principle"] for r in contrastive})}


def run_world(world_id: int, seeds: list[int], base: Path, methods: tuple[str, ...] = METHODS,
              prior: dict[str, tuple[Any, ...]] | None = None) -> list[dict[str, Any]]:
    params = draw_params(world_id, prior=prior)
    splits = draw_split(world_id, prior or PRIOR)
    overrides = {k: v for k, v in asdict(params).items() if v != getattr(WorldParams(), k)}
    cells = []
    for seed in seeds:
        work = base / f"w{world_id}-s{seed}"
        work.mkdir(parents=True, exist_ok=True)
        truth = TruthWorld(params, seed=seed)
        best, start = best_expected_gold(truth), 100 * truth.expected_gold("")
        findable = best_expected_gold(truth, findable=True)
        for method in methods:
            cell = run_cell(method, seed, overrides, work, False, splits=splits)
            cell.pop("decisions", None)
            cell.update(world=world_id, best_expected_gold=round(best, 2), headroom=round(best - start, 2),
                        findable_headroom=round(max(0.0, findable - start), 2))
            if method == "decoevo":
                run_dir = work / f"{method}-s{seed}"
                drift = run_drift(run_dir).to_json()
                cell["drift"] = {"flagged": len(drift["flagged"]), "accepted_steps": len(drift["accepted_steps"])}
                cell["audits"] = first_round_audits(run_dir, truth.initial_generator_skill())
            cells.append(cell)
            print(f"world {world_id} {method:9s} s{seed:<3d} gold {cell['gold']:6.2f} calls {cell['calls']:5d} "
                  f"cpu {cell['cpu_s']:5.2f}s", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    return cells


def _mean(xs: list[float]) -> float:
    return round(statistics.fmean(xs), 2)


def wilson(k: int, n: int, z: float = 1.96) -> list[float] | None:
    """The Wilson score interval (95%) of a share k/n."""
    if n == 0:
        return None
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return [round(max(0.0, mid - half), 3), round(min(1.0, mid + half), 3)]


def classifier(pairs: list[tuple[bool, bool]]) -> dict[str, Any]:
    """Precision and recall (with Wilson intervals) of a flag (first) as a predictor of an outcome (second)."""
    tp = sum(1 for f, o in pairs if f and o)
    flagged, positive = sum(1 for f, _ in pairs if f), sum(1 for _, o in pairs if o)
    return {"n": len(pairs), "flagged": flagged, "positives": positive, "true_positives": tp,
            "precision": round(tp / flagged, 3) if flagged else None, "precision_ci": wilson(tp, flagged),
            "recall": round(tp / positive, 3) if positive else None, "recall_ci": wilson(tp, positive)}


def present(cells: list[dict[str, Any]]) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    methods = tuple(m for m in METHODS if any(c["method"] == m for c in cells))
    return methods, tuple((a, b) for a, b in COMPARISONS if a in methods and b in methods)


def summarise(cells: list[dict[str, Any]], prior: dict[str, tuple[Any, ...]] | None = None) -> dict[str, Any]:
    prior = PRIOR if prior is None else prior
    worlds = sorted({c["world"] for c in cells})
    methods, comparisons = present(cells)
    rows: dict[int, dict[str, Any]] = {}
    for w in worlds:
        mine = [c for c in cells if c["world"] == w]
        by = {m: {c["seed"]: c for c in mine if c["method"] == m} for m in methods}
        row: dict[str, Any] = {"knobs": world_knobs(w, prior), "n_seeds": len(by["skillopt"]),
                               "headroom": _mean([c["headroom"] for c in by["skillopt"].values()]),
                               "findable_headroom": _mean([c.get("findable_headroom", 0.0)
                                                           for c in by["skillopt"].values()]),
                               "best_expected_gold": _mean([c["best_expected_gold"] for c in by["skillopt"].values()])}
        for m in methods:
            gold = [c["gold"] for c in by[m].values()]
            row[m] = {"gold": _mean(gold), "sd": round(statistics.stdev(gold), 2) if len(gold) > 1 else 0.0,
                      "calls": _mean([c["calls"] for c in by[m].values()]),
                      "tokens": _mean([c["tokens"] for c in by[m].values()])}
        for a, b in comparisons:
            ci = paired_difference({s: c["gold"] for s, c in by[a].items()}, {s: c["gold"] for s, c in by[b].items()})
            row[f"{a}-{b}"] = {"mean": round(ci.mean_diff, 2), "p": ci.p_value,
                               "calls_ratio": round(row[a]["calls"] / row[b]["calls"], 2)}
        rows[w] = row
    shares: dict[str, Any] = {}
    for a, b in comparisons:
        key = f"{a}-{b}"
        by_world = {w: {m: {c["seed"]: c["gold"] for c in cells if c["world"] == w and c["method"] == m}
                        for m in (a, b)} for w in worlds}
        corrected = family({w: (by_world[w][a], by_world[w][b]) for w in worlds})
        for w in worlds:
            d, (t, p_holm) = rows[w][key], corrected[w]
            d["ci"] = [None, None] if t is None else [_r(t.ci_low), _r(t.ci_high)]
            d["confidence"] = None if t is None else round(t.confidence, 5)
            d["p_holm"] = p_holm
            d["verdict"] = "tie" if t is None else decide(t.ci_low, t.ci_high)
        verdicts = [rows[w][key]["verdict"] for w in worlds]
        shares[key] = {v: verdicts.count(v) for v in ("win", "tie", "loss")} | {"worlds": len(worlds)}
        shares[key]["ci"] = {v: wilson(verdicts.count(v), len(worlds)) for v in ("win", "tie", "loss")}
    return {"worlds": {str(w): r for w, r in rows.items()}, "shares": shares,
            "knob_association": association(rows, prior), "drift": drift_as_classifier(cells, rows),
            "recommendation": recommendation(cells, rows)}


def recommends(audits: dict[str, Any]) -> bool:
    """The gold-free advice, stated before any world was run: co-evolve when the first round's audits on the
    probe set propose at least one item the initial generator does not name; else keep the rubric fixed."""
    return audits.get("new_structural", 0) + audits.get("new_contrastive", 0) >= 1


def recommendation(cells: list[dict[str, Any]], rows: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """How often `recommends` is right over the prior's worlds. Per world (the advice of most seeds): right
    when it says co-evolve in a world DecoEvo won, or keep the rubric in a world it tied or lost (a tie only
    costs). Per run: co-evolve is right when DecoEvo's gold beat SkillOpt's on that seed."""
    gold = {(c["world"], c["seed"], c["method"]): c["gold"] for c in cells}
    deco = [c for c in cells if c["method"] == "decoevo" and "audits" in c]
    runs = [(recommends(c["audits"]), c["gold"] > gold[(c["world"], c["seed"], "skillopt")])
            for c in deco if (c["world"], c["seed"], "skillopt") in gold]
    worlds = []
    for w, row in rows.items():
        mine = [recommends(c["audits"]) for c in deco if c["world"] == w]
        if mine:
            worlds.append((2 * sum(mine) >= len(mine), row["decoevo-skillopt"]["verdict"] == "win"))
    right = sum(1 for said, won in worlds if said == won)
    return {"per_run": classifier(runs), "per_world": classifier(worlds) | {
        "right": right, "accuracy": round(right / len(worlds), 3) if worlds else None,
        "accuracy_ci": wilson(right, len(worlds))}}


def drift_as_classifier(cells: list[dict[str, Any]], rows: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """The criterion-drift flag of a DecoEvo run as a predictor of a loss, over the prior's worlds: per run
    (flagged vs DecoEvo's gold below SkillOpt's on the same seed), and per world (flagged on at least half
    of its seeds vs the world's Holm verdict "loss")."""
    gold = {(c["world"], c["seed"], c["method"]): c["gold"] for c in cells}
    runs = [(c["drift"]["flagged"] > 0, c["gold"] < gold[(c["world"], c["seed"], "skillopt")])
            for c in cells if c["method"] == "decoevo" and "drift" in c and (c["world"], c["seed"], "skillopt") in gold]
    per_world = []
    for w, row in rows.items():
        mine = [c for c in cells if c["world"] == w and c["method"] == "decoevo" and "drift" in c]
        if mine:
            share = sum(c["drift"]["flagged"] > 0 for c in mine) / len(mine)
            per_world.append((share >= 0.5, row["decoevo-skillopt"]["verdict"] == "loss"))
    return {"per_run": classifier(runs), "per_world": classifier(per_world)}


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 2)


def association(rows: dict[int, dict[str, Any]], prior: dict[str, tuple[Any, ...]] | None = None
                ) -> dict[str, float | None]:
    """Spearman's ρ, over the drawn worlds, between each knob (and the headroom) and DecoEvo − SkillOpt:
    which assumptions decide the result in this prior."""
    from scipy.stats import spearmanr

    worlds = sorted(rows)
    if not worlds or "decoevo-skillopt" not in rows[worlds[0]]:
        return {}
    diff = [rows[w]["decoevo-skillopt"]["mean"] for w in worlds]
    out: dict[str, float | None] = {}
    for name in [*(PRIOR if prior is None else prior), "headroom", "findable_headroom"]:
        xs = [rows[w][name] if name in ("headroom", "findable_headroom") else rows[w]["knobs"][name] for w in worlds]
        if name == "capacity":  # 0 means no limit: the most capacity there is
            xs = [x or 99 for x in xs]
        out[name] = None if len(set(xs)) < 2 or len(worlds) < 3 else round(float(spearmanr(xs, diff)[0]), 2)
    return out


SHORT = {"n_base": "base", "n_spec": "spec", "n_contrast": "contrast", "n_hidden": "hidden",
         "position_bias": "pos bias", "capacity": "cap", "length_cost": "len", "solver_forget": "forget",
         "n_style": "style",
         "vague_criteria": "vague", "spec_decoys": "spec decoys", "spec_vague": "spec vague",
         "question_share": "q share", "generator_rewrite_soften": "soften", "pref_accuracy": "pref acc",
         "judge_noise": "judge noise", "initial_generator_covers_all": "generator covers all",
         "generator_gate": "V_g"}


def tables(results: dict[str, Any]) -> str:
    s = results["summary"]
    methods, _ = present(results["cells"])
    has_sc = "sc_coevo" in methods
    names = {"skillopt": "SkillOpt", "decoevo": "DecoEvo", "sc_coevo": "SC-CoEvo"}
    head = (["world", "knobs off the default", *(names[m] for m in methods), "DecoEvo − SkillOpt [Holm interval]",
             "Holm p", "verdict"] + (["SC-CoEvo − SkillOpt (Holm p, verdict)"] if has_sc else [])
            + ["DecoEvo calls ÷ SkillOpt", "headroom", "findable headroom"])
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    default = asdict(WorldParams()) | SPLITS  # a prior may draw a split's size too (the transfer prior: V_g)
    for w, row in s["worlds"].items():
        off = ", ".join(f"{SHORT[k]} {v}" for k, v in row["knobs"].items() if v != default[k]) or "none"
        d = row["decoevo-skillopt"]
        gold = [f"{row[m]['gold']:.1f} ± {row[m]['sd']:.1f}" for m in methods]
        ci = "–" if d["ci"][0] is None else f"[{d['ci'][0]:+.1f}, {d['ci'][1]:+.1f}]"
        sc = row.get("sc_coevo-skillopt")
        sc_cell = [f"{sc['mean']:+.1f} ({_pfmt(sc['p_holm'])}, {sc['verdict']})"] if sc else []
        out.append("| " + " | ".join([str(w), off, *gold, f"{d['mean']:+.1f} {ci}", _pfmt(d["p_holm"]), d["verdict"],
                                      *sc_cell, f"{d['calls_ratio']:.2f}", f"{row['headroom']:.1f}",
                                      f"{row.get('findable_headroom', 0.0):.1f}"]) + " |")
    out += ["", "| comparison | wins [95% CI] | ties [95% CI] | losses [95% CI] | worlds |", "|---|---|---|---|---|"]
    for key, sh in s["shares"].items():
        cells = [f"{sh[v]} ({sh[v] / sh['worlds']:.0%}) {_share_ci(sh['ci'][v])}" for v in ("win", "tie", "loss")]
        out.append(f"| {key.replace('-', ' − ')} | {' | '.join(cells)} | {sh['worlds']} |")
    out += ["", "*Share intervals: Wilson 95% over the worlds drawn (each world's verdict from its paired test over "
            "seeds, Holm-corrected over the worlds).*"]
    out += ["", "| knob | Spearman ρ with DecoEvo − SkillOpt over the worlds |", "|---|---|"]
    for k, rho in s["knob_association"].items():
        out.append(f"| {k} | {'–' if rho is None else f'{rho:+.2f}'} |")
    return "\n".join(out) + "\n"


def drift_table(results: dict[str, Any]) -> str:
    """The crowding-out flag (criterion drift) as a predictor of a loss, over the prior's worlds."""
    d = results["summary"].get("drift") or {}
    out = ["| unit | flag | predicts | n | flagged | losses | precision [95% CI] | recall [95% CI] |",
           "|---|---|---|---|---|---|---|---|"]
    for unit, flag, what in (("per_run", "any criterion flagged in the DecoEvo run",
                              "DecoEvo's gold below SkillOpt's, same seed"),
                             ("per_world", "flagged on at least half the seeds", "the world's verdict is a loss")):
        c = d.get(unit)
        if c:
            out.append(f"| {unit.replace('_', ' ')} | {flag} | {what} | {c['n']} | {c['flagged']} | {c['positives']} | "
                       f"{_rate(c['precision'], c['precision_ci'])} | {_rate(c['recall'], c['recall_ci'])} |")
    return "\n".join(out) + "\n"


def recommendation_table(results: dict[str, Any]) -> str:
    """The gold-free advice (`recommends`) as a classifier of a win, over the prior's worlds."""
    d = results["summary"].get("recommendation") or {}
    out = ["| unit | says co-evolve | is right when | n | says co-evolve | DecoEvo better | precision [95% CI] | "
           "recall [95% CI] | right [95% CI] |", "|---|---|---|---|---|---|---|---|---|"]
    for unit, said, what in (("per_run", "the run's first audits propose a new item",
                              "DecoEvo's gold beats SkillOpt's, same seed"),
                             ("per_world", "most seeds' first audits do", "the world's verdict is a win")):
        c = d.get(unit)
        if c:
            right = _rate(c.get("accuracy"), c.get("accuracy_ci")) if "accuracy" in c else "–"
            out.append(f"| {unit.replace('_', ' ')} | {said} | {what} | {c['n']} | {c['flagged']} | {c['positives']} | "
                       f"{_rate(c['precision'], c['precision_ci'])} | {_rate(c['recall'], c['recall_ci'])} | {right} |")
    return "\n".join(out) + "\n"


def _rate(x: float | None, ci: list[float] | None) -> str:
    return "–" if x is None or ci is None else f"{x:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _share_ci(ci: list[float] | None) -> str:
    return "–" if ci is None else f"[{ci[0]:.0%}, {ci[1]:.0%}]"


def _pfmt(p: float) -> str:
    return "<1e-4" if p < 1e-4 else f"{p:.2g}"


def _range(text: str) -> list[int]:
    if "-" in text:
        lo, hi = text.split("-")
        return list(range(int(lo), int(hi) + 1))
    return [int(x) for x in text.split(",")]


def prior_of(results: dict[str, Any]) -> dict[str, tuple[Any, ...]]:
    """The prior a results file's worlds were drawn from (files before issue 48 name none: `PRIOR`)."""
    return PRIORS[results.get("prior_name", "one")]


def combine(parts: list[Path], out_path: Path) -> None:
    """One results file from several of disjoint worlds, same seeds and methods (runs kept, cells joined)."""
    loaded = [json.loads(p.read_text(encoding="utf-8")) for p in parts]
    first = loaded[0]
    if any(x.get("methods") != first.get("methods") for x in loaded):
        sys.exit("the parts hold other methods")
    cells = [c for x in loaded for c in x["cells"]]
    if len({(c["world"], c["seed"], c["method"]) for c in cells}) != len(cells):
        sys.exit("the parts overlap: a world is in two of them")
    runs = [r for x in loaded for r in x.get("runs", [])]
    out = {**first, "worlds": sorted({c["world"] for c in cells}), "seeds": sorted({c["seed"] for c in cells}),
           "planned_worlds": sorted({w for x in loaded for w in x.get("planned_worlds", x["worlds"])}), "runs": runs,
           "run": {"wall_s": round(max(r.get("wall_s", 0) for r in runs), 1),
                   "cpu_s": round(sum(r.get("cpu_s", 0) for r in runs), 1), "cells": len(cells),
                   "commit": ", ".join(dict.fromkeys(r["commit"] for r in runs))},
           "summary": summarise(cells, prior_of(first)), "cells": cells}
    out_path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out_path} ({len(cells)} cells from {len(parts)} parts)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", default=None, help="world ids of the prior (a-b or a,b,c; default 200-223, "
                        "or 500-523 with --prior transfer)")
    parser.add_argument("--seeds", default="0-19")
    parser.add_argument("--methods", default=",".join(METHODS), help="of skillopt, decoevo, sc_coevo")
    parser.add_argument("--prior", default="one", choices=sorted(PRIORS),
                        help="one: PRIOR (the stored run); transfer: PRIOR_TRANSFER, the second prior (issue 48)")
    parser.add_argument("--out", default=None, help="the results file (default: mechanism_prior.json, or "
                        "mechanism_prior_transfer.json with --prior transfer)")
    parser.add_argument("--resume", action="store_true",
                        help="keep the (world, seed) cells --out already holds (same methods) and run the rest")
    parser.add_argument("--tables", action="store_true", help="print the markdown tables of --out and exit")
    parser.add_argument("--resummarise", action="store_true", help="recompute the summary of --out from its cells")
    parser.add_argument("--combine", nargs="+", metavar="PART",
                        help="write --out from results files of disjoint worlds (e.g. two processes' --out)")
    args = parser.parse_args()
    out_path = Path(args.out) if args.out else TRANSFER_OUT if args.prior == "transfer" else OUT
    if args.combine:
        combine([Path(x) for x in args.combine], out_path)
        return
    if args.resummarise:
        results = json.loads(out_path.read_text(encoding="utf-8"))
        results["summary"] = summarise(results["cells"], prior_of(results))
        out_path.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        return
    if args.tables:
        results = json.loads(out_path.read_text(encoding="utf-8"))
        print(tables(results) + "\n" + drift_table(results) + "\n" + recommendation_table(results))
        return
    worlds = _range(args.worlds or (TRANSFER_WORLDS if args.prior == "transfer" else WORLDS))
    seeds = _range(args.seeds)
    methods = tuple(m for m in METHODS if m in args.methods.split(","))
    earlier = json.loads(out_path.read_text(encoding="utf-8")) if args.resume and out_path.is_file() else None
    cells: list[dict[str, Any]] = list(earlier["cells"]) if earlier else []
    runs: list[dict[str, Any]] = list(earlier.get("runs", [])) if earlier else []
    if earlier and earlier.get("prior_name", "one") != args.prior:
        sys.exit(f"{out_path} holds worlds of prior {earlier.get('prior_name', 'one')!r}: resume with that --prior")
    prior = PRIORS[args.prior]
    if earlier and earlier.get("methods", list(METHODS)) != list(methods):
        sys.exit(f"{out_path} holds other methods: resume with the same --methods")
    done = {(c["world"], c["seed"]) for c in cells}
    started, cpu0 = time.time(), time.process_time()
    timing: dict[str, Any] = {"commit": commit(), "worlds": []}
    runs.append(timing)

    def save() -> None:
        timing.update(wall_s=round(time.time() - started, 1), cpu_s=round(time.process_time() - cpu0, 1))
        ran = sorted({c["world"] for c in cells})
        out = {"bench": "mechanism_prior", "machine": machine(), "worlds": ran, "planned_worlds": worlds,
               "seeds": sorted({c["seed"] for c in cells}), "planned_seeds": seeds, "methods": list(methods),
               "splits": SPLITS, "hyper": HYPER,
               "prior_name": args.prior, "prior": {k: list(v) for k, v in prior.items()}, "runs": runs,
               "run": {"wall_s": round(sum(r.get("wall_s", 0) for r in runs), 1),
                       "cpu_s": round(sum(r.get("cpu_s", 0) for r in runs), 1), "cells": len(cells),
                       "commit": ", ".join(dict.fromkeys(r["commit"] for r in runs))},
               "summary": summarise(cells, prior), "cells": cells}
        out_path.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")

    # Seed by seed over every world: a run stopped early has every world on fewer seeds (what the shares over
    # worlds need), and --resume adds seeds; results are saved after every seed's sweep of the worlds.
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds:
            todo = [w for w in worlds if (w, seed) not in done]
            for w in todo:
                cells += run_world(w, [seed], Path(tmp), methods, prior)
            if todo:
                timing["worlds"].append(f"seed {seed}: worlds {todo[0]}-{todo[-1]}")
                save()
    print(f"wrote {out_path} ({len(cells)} cells, {timing.get('wall_s')} s wall, {timing.get('cpu_s')} s CPU)")


if __name__ == "__main__":
    main()
