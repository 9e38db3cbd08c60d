"""The paper's quantities in the known-truth world (`decoevo.testing.truth_world`): every method, every seed.

A test of the implementation's mechanics under a stated model of the world, not evidence about real
models. Each cell is one run of the real engine, in process on a virtual clock, against a world drawn by
the seed (its requirements' names and weights) with the parameters of the setting. Measured against the
world's truth after the run:

- final gold score (0-100) of the final solver skill on the test split (Tables 1-3);
- criterion-level precision / recall / F1 of the final generator's rubrics on the test split (Table 5);
- gold and proxy (J under the generator in force) on the diagnostic split after every step (Figure 3);
- paid calls and tokens (Table 4);
- every solver-gate and generator-gate decision against the truth: was the candidate truly better?

Settings: `main` (the default world, all 13 methods), the controls (`spec_only`: every requirement is in
the specification and the initial generator; `generator_covers_all`), a one-at-a-time sweep over the
noise and error parameters and over the costs a real setting has (capacity, length, forgetting, lenient
criteria, a misspecified specification, per-question requirements, softening rewrites, style tags), and a
judge-noise sweep for the gate table. Results go to
bench/results/mechanism.json and the figure to docs/mechanism_dynamics.png; `--tables` prints
docs/mechanism.md's tables from the results file.

    nice -n 10 .venv/bin/python -m bench.mechanism.mechanism --only main --seeds $(seq -s, 0 19)   # ~13 min
    nice -n 10 .venv/bin/python -m bench.mechanism.mechanism --only controls,sweep,gates --merge    # ~12 min
    python -m bench.mechanism.doc                                                   # docs/mechanism.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))

from decoevo.methods import METHODS  # noqa: E402
from decoevo.tasks.load import load_questions  # noqa: E402
from decoevo.tasks.specs import INITIAL_SOLVER_SKILL  # noqa: E402
from decoevo.testing.truth_world import TAG, TruthWorld, WorldParams, describe, render_skill  # noqa: E402
from decoevo.testing.truth_world_run import (  # noqa: E402
    Trace,
    gold_score,
    proxy_score,
    rubric_alignment,
    run_in_process,
    views,
    world_config,
    write_world_files,
)

# The paper preset's shape (K = 4, M = 3, L = 6, H = 2), its sizes scaled down so that the whole grid runs
# in about half an hour on one shared core (measured: a DecoEvo cell takes 3-8 s there).
SPLITS = {"train": 30, "probe": 6, "solver_gate": 12, "generator_gate": 10, "diagnostic": 12, "test": 50}
HYPER = {"steps": 12, "batch_size": 4, "audit_every": 4, "max_stalls": 3, "rollouts": 6, "pairs_per_question": 2,
         "concurrency": 16}
CORE = ("skillopt", "sc_coevo", "decoevo", "task_prior")
SWEPT = ("skillopt", "sc_coevo", "decoevo")
# One parameter at a time around the defaults (the default level is the `main` setting itself).
SWEEP: dict[str, list[dict[str, Any]]] = {
    "judge_noise": [{"judge_noise": v} for v in (0.0, 0.3, 0.5)],
    "pref_accuracy": [{"pref_accuracy": v} for v in (0.5, 0.6, 0.75, 1.0)],
    "audit_noise": [{"audit_noise": a, "audit_miss": m} for a, m in ((0.0, 0.0), (0.3, 0.4))],
    "generator_rewrite_drop": [{"generator_rewrite_drop": v} for v in (0.0, 0.3)],
    "contrast_spontaneous": [{"contrast_spontaneous": v} for v in (0.05, 0.7)],
    # the costs a real setting has (off in the default world), one at a time
    "capacity": [{"capacity": v} for v in (5, 4, 3)],
    "spec_decoys": [{"spec_decoys": 3, "capacity": 3}],
    # nothing real to find: the only listed items are decoys, what users value is hidden
    "nothing_to_find": [{"n_spec": 0, "n_contrast": 0, "n_hidden": 2, "spec_decoys": 3, "capacity": 3}],
    "length_cost": [{"length_cost": 0.06}],
    "solver_forget": [{"solver_forget": 0.3}],
    "vague_criteria": [{"vague_criteria": 0.5}],
    "generator_rewrite_soften": [{"generator_rewrite_soften": 0.5}],
    "question_share": [{"question_share": 0.5}],
    "n_style": [{"n_style": 3}, {"n_style": 3, "pref_accuracy": 0.5}],
    # a wrong preference teaches a wrong rule where answers carry style tags, and a rule costs with capacity
    "wrong_auditor": [{"n_style": 3, "pref_accuracy": 0.5, "capacity": 3}, {"pref_accuracy": 0.0},
                      {"n_style": 3, "pref_accuracy": 0.0}, {"n_style": 3, "pref_accuracy": 0.0, "capacity": 3}],
    "position_bias": [{"position_bias": 0.4, "n_style": 3}],
}
SWEEP_EXTRA = {"generator_rewrite_drop": ("no_verification",)}  # where verification should matter
GATE_NOISE = (0.0, 0.15, 0.3, 0.5)
# The gate table needs many candidates that are not better: rewriters that drop and invent principles often.
GATE_STRESS = {"solver_rewrite_drop": 0.3, "solver_rewrite_decoy": 0.3, "generator_rewrite_drop": 0.3,
               "generator_rewrite_decoy": 0.3}


# ---- one cell -------------------------------------------------------------------------------------
def _skill_file(path: Path) -> str:
    """A skill's text from its markdown file (the two comment lines and the blank line dropped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return "\n".join(line for line in lines if not line.startswith("<!--")).strip()


def _decisions(world: TruthWorld, run_dir: Path, trace: Trace, initial: tuple[str, str]) -> dict[str, list[dict]]:
    """Every gate decision of the run with the truth about its candidate."""
    solver, generator = initial
    out: dict[str, list[dict]] = {"solver": [], "generator": []}
    for e in trace.events:
        if e["event"] == "inner_step" and e.get("J_incumbent") is not None:
            step = e["step"]
            if e["accepted"]:
                candidate = _skill_file(run_dir / "skills" / "solver" / f"v{e['solver_version']:03d}.md")
            else:
                candidate = _skill_file(run_dir / "candidates" / f"solver_step{step:03d}_rejected.md")
            old, new = world.expected_gold(solver), world.expected_gold(candidate)
            out["solver"].append({"accepted": e["accepted"], "true_delta": new - old,
                                  "proxy_delta": e["J_candidate"] - e["J_incumbent"]})
            if e["accepted"]:
                solver = candidate
        elif e["event"] == "outer_round" and e.get("policy") is not None:
            rnd = e["round"]
            if e["accepted"]:
                candidate = _skill_file(run_dir / "skills" / "generator" / f"v{e['generator_version']:03d}.md")
            else:
                candidate = _skill_file(run_dir / "candidates" / f"generator_round{rnd:03d}_rejected.md")
            (r_old, d_old), (r_new, d_new) = world.generator_truth(generator), world.generator_truth(candidate)
            # Truly better or worse by its consequence: the expected gold of a solver that follows every
            # principle the generator's rubrics reward (decoys included, which cost gold only where the
            # world makes principles costly), not by counting decoys.
            consequence = rewarded_gold(world, candidate) - rewarded_gold(world, generator)
            out["generator"].append({"accepted": e["accepted"], "policy": e["policy"], "better": consequence > 1e-9,
                                     "worse": consequence < -1e-9, "consequence": round(100 * consequence, 3),
                                     "recall_delta": round(r_new - r_old, 4), "decoy_delta": d_new - d_old,
                                     "deltas": e.get("deltas") or {}})
            if e["accepted"]:
                generator = candidate
    return out


def commit() -> str:
    """The commit the bench runs at, "+dirty" when the source tree has uncommitted changes."""
    def git(*a: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *a], capture_output=True, text=True).stdout.strip()
    dirty = git("status", "--porcelain", "--", "src", "bench", ":!bench/results")
    return git("rev-parse", "--short", "HEAD") + ("+dirty" if dirty else "")


def rewarded_gold(world: TruthWorld, generator: str) -> float:
    """Expected gold (0-1) of the solver strategy that names exactly what the generator's rubrics check."""
    return world.expected_gold(render_skill("Cover these.", _tags(generator), world.name))


def _tags(text: str) -> list[str]:
    return list(dict.fromkeys(TAG.findall(text)))


def run_cell(method: str, seed: int, overrides: dict[str, Any], work: Path, trajectories: bool,
             match_run: Path | None = None, hyper: dict[str, Any] | None = None,
             splits: dict[str, int] | None = None) -> dict[str, Any]:
    """One run; `splits` overrides some of SPLITS' sizes (the transfer prior draws a small generator gate)."""
    world = TruthWorld(replace(WorldParams(), **overrides), seed=seed)
    sizes = {**SPLITS, **(splits or {})}
    files = write_world_files(world, work / "world", sum(sizes.values()))
    budget = {"match_run": str(match_run)} if match_run is not None else None
    config = world_config(world, files, method, seed, splits=sizes, hyper={**HYPER, **(hyper or {})}, budget=budget)
    run_dir = work / f"{method}-s{seed}"
    started = time.process_time()
    result, trace = run_in_process(world, config, run_dir)
    cpu = time.process_time() - started
    ids = json.loads((run_dir / "splits.json").read_text())
    questions = load_questions(config.data)
    test, diag = views(questions, ids["test"]), views(questions, ids["diagnostic"])
    state = result.state
    total = result.ledger.total()
    cell: dict[str, Any] = {
        "method": method, "seed": seed, "overrides": overrides, "hyper": hyper or {}, "cpu_s": round(cpu, 2),
        "gold": round(gold_score(world, state.solver.text, test), 2),
        "expected_gold": round(100 * world.expected_gold(state.solver.text), 2),
        "alignment": {k: round(v, 4) for k, v in rubric_alignment(world, state.generator.text, test).items()},
        "calls": total.calls, "tokens": total.tokens,
        "solver_accepts": state.solver_accepts, "generator_accepts": state.generator_accepts,
        "outer_rounds": state.outer_rounds, "steps_done": state.next_step, "stopped": state.stopped,
        "decisions": _decisions(world, run_dir, trace, (config.initial_solver_skill or "",
                                                        world.initial_generator_skill())),
    }
    if trajectories:
        initial = (-1, config.initial_solver_skill or INITIAL_SOLVER_SKILL, world.initial_generator_skill())
        cell["trajectory"] = [{"step": step, "gold": round(gold_score(world, s, diag), 2),
                               "proxy": round(proxy_score(world, s, g, diag), 2)}
                              for step, s, g in [initial, *trace.steps]]
    return cell


# ---- the grid -------------------------------------------------------------------------------------
def run_setting(name: str, methods: list[str], seeds: list[int], overrides: dict[str, Any], base: Path,
                trajectories: bool = False, hyper: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    cells = []
    for seed in seeds:
        work = base / f"{name}-s{seed}"
        work.mkdir(parents=True, exist_ok=True)
        ordered = sorted(methods, key=lambda m: m == "budget_matched")  # after the DecoEvo run it matches
        for method in ordered:
            match = work / f"decoevo-s{seed}" if method == "budget_matched" else None
            if match is not None and not (match / "ledger.json").is_file():
                run_setting(name, ["decoevo"], [seed], overrides, base, hyper=hyper)  # the run it matches, first
            cell = run_cell(method, seed, overrides, work, trajectories, match, hyper)
            cell["setting"] = name
            cells.append(cell)
            print(f"{name:28s} {method:16s} s{seed} gold {cell['gold']:6.2f} calls {cell['calls']:5d} "
                  f"cpu {cell['cpu_s']:5.2f}s", flush=True)
        shutil.rmtree(work, ignore_errors=True)
    return cells


def stats(values: list[float]) -> dict[str, float | None]:
    if not values:
        return {"mean": None, "sd": None, "min": None, "median": None, "max": None, "n": 0}
    return {"mean": round(statistics.fmean(values), 2), "sd": round(statistics.stdev(values), 2) if len(values) > 1
            else 0.0, "min": round(min(values), 2), "median": round(statistics.median(values), 2),
            "max": round(max(values), 2), "n": len(values)}


def summarise(cells: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for setting in dict.fromkeys(c["setting"] for c in cells):
        rows = {}
        for method in dict.fromkeys(c["method"] for c in cells if c["setting"] == setting):
            mine = [c for c in cells if c["setting"] == setting and c["method"] == method]
            rows[method] = {
                "gold": stats([c["gold"] for c in mine]), "expected_gold": stats([c["expected_gold"] for c in mine]),
                "gold_by_seed": [c["gold"] for c in mine],
                "precision": stats([100 * c["alignment"]["precision"] for c in mine]),
                "recall": stats([100 * c["alignment"]["recall"] for c in mine]),
                "f1": stats([100 * c["alignment"]["f1"] for c in mine]),
                "calls": stats([c["calls"] for c in mine]), "tokens": stats([c["tokens"] for c in mine]),
                "generator_accepts": stats([c["generator_accepts"] for c in mine]),
            }
        out[setting] = rows
    return out


def gate_table(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """False accepts / rejects of each gate against the truth, pooled over seeds, per judge noise."""
    rows = []
    for noise in GATE_NOISE:
        mine = [c for c in cells if c["setting"] == f"gate:margin:judge_noise={noise}"]
        solver = [d for c in mine if c["method"] == "decoevo" for d in c["decisions"]["solver"]]
        not_better = [d for d in solver if d["true_delta"] <= 1e-9]
        worse = [d for d in solver if d["true_delta"] < -1e-9]
        better = [d for d in solver if d["true_delta"] > 1e-9]
        row: dict[str, Any] = {"judge_noise": noise, "solver_decisions": len(solver),
                               "solver_false_accept": _rate([d["accepted"] for d in not_better]),
                               "solver_worse_accepted": _rate([d["accepted"] for d in worse]),
                               "solver_false_reject": _rate([not d["accepted"] for d in better])}
        for method, key in (("decoevo", "pareto"), ("sc_coevo", "score_coupled")):
            gen = [d for c in mine if c["method"] == method for d in c["decisions"]["generator"]]
            row[f"{key}_decisions"] = len(gen)
            row[f"{key}_false_accept"] = _rate([d["accepted"] for d in gen if not d["better"]])
            row[f"{key}_worse_accepted"] = _rate([d["accepted"] for d in gen if d["worse"]])
            row[f"{key}_false_reject"] = _rate([not d["accepted"] for d in gen if d["better"]])
        bound = [d for c in cells if c["setting"] == f"gate:paired_bound:judge_noise={noise}"
                 for d in c["decisions"]["solver"]]
        row["paired_bound_decisions"] = len(bound)
        row["paired_bound_false_accept"] = _rate([d["accepted"] for d in bound if d["true_delta"] <= 1e-9])
        row["paired_bound_worse_accepted"] = _rate([d["accepted"] for d in bound if d["true_delta"] < -1e-9])
        row["paired_bound_false_reject"] = _rate([not d["accepted"] for d in bound if d["true_delta"] > 1e-9])
        pb = [d for c in cells if c["setting"] == f"gate:pareto_bound:judge_noise={noise}"
              for d in c["decisions"]["generator"]]
        row["pareto_bound_decisions"] = len(pb)
        row["pareto_bound_false_accept"] = _rate([d["accepted"] for d in pb if not d["better"]])
        row["pareto_bound_worse_accepted"] = _rate([d["accepted"] for d in pb if d["worse"]])
        row["pareto_bound_false_reject"] = _rate([not d["accepted"] for d in pb if d["better"]])
        row["gold_pareto"] = stats([c["gold"] for c in mine if c["method"] == "decoevo"])
        row["gold_pareto_bound"] = stats([c["gold"] for c in cells
                                          if c["setting"] == f"gate:pareto_bound:judge_noise={noise}"])
        row["gold_margin"] = stats([c["gold"] for c in mine if c["method"] == "decoevo"])
        row["gold_paired_bound"] = stats([c["gold"] for c in cells
                                          if c["setting"] == f"gate:paired_bound:judge_noise={noise}"])
        rows.append(row)
    return rows


def _rate(flags: list[bool]) -> dict[str, Any]:
    return {"rate": round(sum(flags) / len(flags), 3) if flags else None, "k": sum(flags), "n": len(flags)}


FIGURE_ROWS = (("main", "default world"),
               ("sweep:generator_rewrite_drop:generator_rewrite_drop=0.3", "generator rewriter drops a principle 30%"))


def figure(cells: list[dict[str, Any]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [(k, label) for k, label in FIGURE_ROWS if any(c["setting"] == k and "trajectory" in c for c in cells)]
    fig, axes = plt.subplots(len(rows), 2, figsize=(10, 3.6 * len(rows)), sharey=True, squeeze=False)
    for (setting, label), pair in zip(rows, axes, strict=True):
        for ax, key in zip(pair, ("gold", "proxy"), strict=True):
            for method, color in (("skillopt", "C0"), ("sc_coevo", "C1"), ("task_prior", "C3"), ("direct_audit", "C4"),
                                  ("no_verification", "C5"), ("decoevo", "C2")):  # DecoEvo drawn last, on top
                mine = [c["trajectory"] for c in cells if c["setting"] == setting and c["method"] == method
                        and "trajectory" in c]
                if not mine:
                    continue
                steps = sorted({p["step"] for t in mine for p in t})
                means = [statistics.fmean(p[key] for t in mine for p in t if p["step"] == s) for s in steps]
                ax.plot([s + 1 for s in steps], means, marker="o", ms=3, label=method, color=color,
                        lw=2.5 if method == "decoevo" else 1.2, ls="--" if method == "no_verification" else "-")
            ax.set_title(f"{label}: {'gold' if key == 'gold' else 'proxy J (generator in force)'}", fontsize=10)
            ax.set_xlabel("inner steps done")
            ax.grid(alpha=0.3)
        pair[0].set_ylabel("diagnostic split, 0-100, mean of seeds")
        pair[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ---- markdown tables for docs/mechanism.md ------------------------------------------------------------
def _ms(st: dict[str, Any]) -> str:
    return "–" if st["mean"] is None else f"{st['mean']:.1f} ± {st['sd']:.1f}"


def tables(results: dict[str, Any]) -> str:
    summary, out = results["summary"], []
    main = summary.get("main", {})
    if main:
        base = main["skillopt"]
        out += ["### Final gold score, all methods (default world)", "",
                "| method | gold (mean ± sd) | min / median / max | per seed | Δ vs SkillOpt | calls | tokens | "
                "calls ÷ SkillOpt | tokens ÷ SkillOpt |", "|---|---|---|---|---|---|---|---|---|"]
        for method, row in main.items():
            g = row["gold"]
            out.append(f"| {method} | {_ms(g)} | {g['min']:.1f} / {g['median']:.1f} / {g['max']:.1f} | "
                       f"{', '.join(f'{v:.1f}' for v in row['gold_by_seed'])} | "
                       f"{g['mean'] - base['gold']['mean']:+.1f} | {row['calls']['mean']:.0f} | "
                       f"{row['tokens']['mean']:.0f} | "
                       f"{row['calls']['mean'] / base['calls']['mean']:.2f} | "
                       f"{row['tokens']['mean'] / base['tokens']['mean']:.2f} |")
        out += ["", "### Rubric alignment with the latent requirements (final generator, test split)", "",
                "| method | precision | recall | F1 | generator accepts |", "|---|---|---|---|---|"]
        for method, row in main.items():
            out.append(f"| {method} | {_ms(row['precision'])} | {_ms(row['recall'])} | {_ms(row['f1'])} | "
                       f"{_ms(row['generator_accepts'])} |")
    settings = [k for k in summary if k != "main" and not k.startswith("gate:")]
    if settings:
        out += ["", "### Controls and sweep: gold (mean ± sd over seeds) for the core methods", "",
                "| setting | " + " | ".join(CORE) + " | DecoEvo − SkillOpt | DecoEvo calls ÷ SkillOpt |",
                "|---|" + "---|" * (len(CORE) + 2)]
        for k in settings:
            row = summary[k]
            cells = [_ms(row[m]["gold"]) if m in row else "–" for m in CORE]
            diff = row["decoevo"]["gold"]["mean"] - row["skillopt"]["gold"]["mean"]
            ratio = row["decoevo"]["calls"]["mean"] / row["skillopt"]["calls"]["mean"]
            out.append(f"| {k} | " + " | ".join(cells) + f" | {diff:+.1f} | {ratio:.2f} |")
    gates = [g for g in results.get("gates", []) if g["solver_decisions"] or g["paired_bound_decisions"]]
    if gates:
        def r(x: dict[str, Any]) -> str:
            return "–" if x["rate"] is None else f"{x['rate']:.2f} ({x['k']}/{x['n']})"

        out += ["", "### Solver gates against the truth, by judge noise (DecoEvo, stress world, pooled over seeds)",
                "", "| judge noise | gate | decisions | false accept | accepts of worse | false reject | final gold |",
                "|---|---|---|---|---|---|---|"]
        for g in gates:
            for name, key, gold in (("ε margin", "solver", "gold_margin"),
                                    ("paired bound", "paired_bound", "gold_paired_bound")):
                out.append(f"| {g['judge_noise']} | {name} | {g[f'{key}_decisions']} | {r(g[f'{key}_false_accept'])} "
                           f"| {r(g[f'{key}_worse_accepted'])} | {r(g[f'{key}_false_reject'])} | {_ms(g[gold])} |")
        out += ["", "### Generator rules against the truth, by judge noise (stress world, pooled over seeds)", "",
                "| judge noise | rule | decisions | false accept | accepts of worse | false reject | final gold |",
                "|---|---|---|---|---|---|---|"]
        for g in gates:
            for name, key in (("Pareto (DecoEvo)", "pareto"), ("Pareto, paired bound", "pareto_bound"),
                              ("score-coupled (SC-CoEvo)", "score_coupled")):
                if f"{key}_decisions" not in g:
                    continue
                gold = _ms(g[f"gold_{key}"]) if f"gold_{key}" in g else "–"
                out.append(f"| {g['judge_noise']} | {name} | {g[f'{key}_decisions']} | {r(g[f'{key}_false_accept'])} "
                           f"| {r(g[f'{key}_worse_accepted'])} | {r(g[f'{key}_false_reject'])} | {gold} |")
    return "\n".join(out) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0,1,2,3,4")
    parser.add_argument("--only", default="main,controls,sweep,gates",
                        help="parts: main, controls, sweep (or sweep:PARAM for one parameter), gates")
    parser.add_argument("--out", default=str(RESULTS / "mechanism.json"))
    parser.add_argument("--merge", action="store_true", help="keep the cells of the settings not rerun from --out")
    parser.add_argument("--tables", action="store_true", help="print the markdown tables of --out and exit")
    parser.add_argument("--figure", action="store_true", help="redraw docs/mechanism_dynamics.png from --out and exit")
    args = parser.parse_args()
    if args.figure:
        cells = json.loads(Path(args.out).read_text(encoding="utf-8"))["cells"]
        figure(cells, ROOT / "docs" / "mechanism_dynamics.png")
        return
    if args.tables:
        print(tables(json.loads(Path(args.out).read_text(encoding="utf-8"))))
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    parts = set(args.only.split(","))
    started, cpu0 = time.time(), time.process_time()
    earlier = json.loads(Path(args.out).read_text(encoding="utf-8")) if args.merge and Path(args.out).is_file() \
        else {"cells": [], "runs": []}
    cells: list[dict[str, Any]] = []
    timing: dict[str, Any] = {"parts": sorted(parts), "seeds": seeds, "commit": commit()}

    def save() -> None:
        timing.update(wall_s=round(time.time() - started, 1), cpu_s=round(time.process_time() - cpu0, 1),
                      cells=len(cells))
        rerun = {c["setting"] for c in cells}
        merged = [c for c in earlier["cells"] if c["setting"] not in rerun] + cells
        out = {"bench": "mechanism", "machine": machine(), "seeds": seeds, "splits": SPLITS, "hyper": HYPER,
               "world_defaults": asdict(WorldParams()), "example_world": describe(TruthWorld(seed=0)),
               "runs": [*earlier.get("runs", []), timing], "summary": summarise(merged),
               "gates": gate_table(merged), "cells": merged}
        Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        if any(c["setting"] == "main" for c in merged):
            figure(merged, ROOT / "docs" / "mechanism_dynamics.png")

    jobs: list[tuple[str, list[str], dict[str, Any], dict[str, Any], bool]] = []
    if "main" in parts:
        jobs.append(("main", list(METHODS), {}, {}, True))
    if "controls" in parts:
        jobs.append(("control:spec_only", list(CORE), {"n_base": 4, "n_spec": 0, "n_contrast": 0, "n_hidden": 0},
                     {}, False))
        jobs.append(("control:generator_covers_all", list(CORE), {"initial_generator_covers_all": True}, {}, False))
    for param, values in SWEEP.items():
        if "sweep" in parts or f"sweep:{param}" in parts:
            for overrides in values:
                label = ",".join(f"{k}={v}" for k, v in overrides.items())
                jobs.append((f"sweep:{param}:{label}", [*SWEPT, *SWEEP_EXTRA.get(param, ())], overrides, {},
                             param == "generator_rewrite_drop"))
    if "gates" in parts:  # both solver gates and both generator rules, in a world that proposes bad candidates
        for noise in GATE_NOISE:
            stress = {**GATE_STRESS, "judge_noise": noise}
            jobs.append((f"gate:margin:judge_noise={noise}", ["decoevo", "sc_coevo"], stress, {}, False))
            jobs.append((f"gate:paired_bound:judge_noise={noise}", ["decoevo"], stress,
                         {"solver_gate": "paired_bound"}, False))
            jobs.append((f"gate:pareto_bound:judge_noise={noise}", ["decoevo"], stress,
                         {"generator_gate": "paired_bound"}, False))
    with tempfile.TemporaryDirectory() as tmp:
        for name, methods, overrides, hyper, trajectories in jobs:
            cells += run_setting(name, methods, seeds, overrides, Path(tmp), trajectories, hyper)
            save()
    print(f"wrote {args.out} ({len(cells)} cells; this invocation {timing['wall_s']} s wall, {timing['cpu_s']} s CPU)")


if __name__ == "__main__":
    main()
