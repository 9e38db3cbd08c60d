"""The expected paid calls of the runs a new user makes first (issue 34 item 7), against what they paid, per
role: the README's toy run (`decoevo run --base-url … --model toy --steps 2`, and the same at 4 steps) and,
given its run directory, the README's first run on the embedded model (`decoevo run`, a few minutes on two
quiet cores, so it is made beforehand and passed with --embedded). For each run: the estimate printed before
it (a prior) and the progress line's re-estimate after each step and round (engine/reestimate.py), replayed
from the run directory (cli/replay_estimate.py), then the prior's calls per role beside the ledger's.

    .venv/bin/python -m bench.cost.first_runs --embedded runs/decoevo-healthbench_sample-s0 --old-src OLD/src \
        --prior-runs PRIOR/runs/*   # -> bench/results/estimate_first_runs.json and markdown tables
    .venv/bin/python -m bench.cost.first_runs --count PRIOR/runs/*   # their entries for embedded_prior.yaml

The embedded default's prior (src/decoevo/engine/embedded_prior.yaml) is counted on runs other than the
README's first run, which it is checked on here. Each of those prior runs is also estimated with the prior
counted on the others only (leave one out), which gives the prior's spread on runs it was not counted on.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from bench._common import RESULTS
from decoevo.cli.replay_estimate import expected_by_event
from decoevo.engine.config import config_from_dict
from decoevo.engine.estimate import estimate_calls
from decoevo.engine.model_prior import counted, with_counts
from decoevo.engine.reestimate import prior_for
from decoevo.methods import get_method
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions


def toy_run(where: Path, steps: int, cli_doc: bool = False) -> Path:
    """The README's toy command (or docs/cli.md's, `toy_run_args`) in a fresh process and cache."""
    env = {**os.environ, "DECOEVO_CACHE": str(where / "cache.sqlite"), "COLUMNS": "120"}
    where.mkdir(parents=True)
    with serve_app(toy_server().app()) as url:
        args = (toy_run_args(f"{url}/v1", write_toy_questions(where / "toy.jsonl"), where / "runs", "first",
                             steps=steps) if cli_doc else
                ["run", "--base-url", f"{url}/v1", "--model", "toy", "--steps", str(steps),
                 "--runs-root", str(where / "runs")])
        subprocess.run([sys.executable, "-m", "decoevo", *args], env=env, check=True, stdout=subprocess.DEVNULL)
    (run,) = (where / "runs").iterdir()
    return run


def measure(name: str, run: Path) -> dict[str, Any]:
    config = config_from_dict(yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8")))
    method = get_method(config.method)
    prior = estimate_calls(method, config.hyper, config.splits, seed=config.seed, rates=prior_for(method, config.lm))
    ledger = {r["role"]: r["calls"] for r in json.loads((run / "ledger.json").read_text(encoding="utf-8"))["rows"]}
    rows = expected_by_event(run)
    paid = sum(ledger.values())
    events = [json.loads(x) for x in (run / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    outcomes = [f"{e['event'].replace('_', ' ')} {e.get('step', e.get('round'))}: {e.get('outcome')}"
                for e in events if e["event"] in ("inner_step", "outer_round")]
    return {"run": name, "dir": run, "paid": paid, "outcomes": outcomes,
            "by_phase": [{**r, "error": r["expected"] / paid - 1} for r in rows],
            "by_role": {role: {"prior": round(n, 1), "paid": ledger.get(role, 0)}
                        for role, n in prior.calls_by_role().items()}}


def outcomes(run: Path) -> dict[str, Any]:
    """A run's entry for embedded_prior.yaml: its steps, rounds and how many were not gated, kept, invalid."""
    events = [json.loads(x) for x in (run / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    steps = [e for e in events if e["event"] in ("inner_step", "inner_step_failed")]
    rounds = [e for e in events if e["event"] in ("outer_round", "outer_round_failed")]
    config = yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8"))
    ledger = json.loads((run / "ledger.json").read_text(encoding="utf-8"))["rows"]
    return {"run": run.name, "data": Path(str(config["data"].get("path") or config["data"].get("format"))).name,
            "seed": config["seed"], "steps": len(steps),
            "ungated": sum(e.get("outcome") in ("invalid", "no_candidate") or e["event"] == "inner_step_failed"
                           for e in steps),
            "kept": sum(e.get("outcome") != "accepted" for e in steps), "rounds": len(rounds),
            # a round whose generator rewrite failed (unparseable) is not verified either
            "generator_invalid": sum(e.get("outcome") == "invalid" or e["event"] == "outer_round_failed"
                                     for e in rounds),
            "paid": sum(r["calls"] for r in ledger)}


def leave_one_out(runs: list[Path]) -> list[dict[str, Any]]:
    """Each prior run estimated with the prior counted on the other prior runs only."""
    counts = [outcomes(r) for r in runs]
    out = []
    for run, own in zip(runs, counts, strict=True):
        others = counted([c for c in counts if c is not own], "the other prior runs")
        config = config_from_dict(yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8")))
        method = get_method(config.method)
        rates = with_counts(prior_for(method), others)
        est = estimate_calls(method, config.hyper, config.splits, seed=config.seed, rates=rates).expected
        out.append({"run": f"{own['data']} seed {own['seed']}", "paid": own["paid"], "expected": est,
                    "ratio": est / own["paid"]})
    return out


OLD = """
import json, sys, yaml
from pathlib import Path
from decoevo.engine.config import config_from_dict
from decoevo.engine.estimate import estimate_calls
from decoevo.methods import get_method
run = Path(sys.argv[1])
config = config_from_dict(yaml.safe_load((run / "config.yaml").read_text(encoding="utf-8")))
est = estimate_calls(get_method(config.method), config.hyper, config.splits, seed=config.seed)
print(json.dumps({"expected": est.expected, "by_role": est.calls_by_role()}))
"""


def old_estimate(src: Path, run: Path) -> dict[str, Any]:
    """What the code in `src` estimated before `run` (in a process of its own, that code first on the path)."""
    out = subprocess.run([sys.executable, "-c", OLD, str(run)], env={**os.environ, "PYTHONPATH": str(src)},
                         check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedded", type=Path, help="the README's first run on the embedded model (run dir)")
    parser.add_argument("--old-src", type=Path,
                        help="the src/ folder of the code to compare with (git archive c08ca7c src | tar -x): "
                             "its estimate before each run, per role")
    parser.add_argument("--out", type=Path, default=RESULTS / "estimate_first_runs.json")
    parser.add_argument("--prior-runs", type=Path, nargs="*", default=[],
                        help="the runs embedded_prior.yaml is counted on: each estimated from the others")
    parser.add_argument("--count", type=Path, nargs="*", help="print these runs' entries for embedded_prior.yaml")
    args = parser.parse_args()
    if args.count:
        print(yaml.safe_dump([outcomes(r) for r in args.count], sort_keys=False))
        return
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for steps in (2, 4):
            name = f"toy, --steps {steps}"
            cases.append(measure(name, toy_run(Path(tmp) / f"toy{steps}", steps)))
        cases.append(measure("toy, docs/cli.md (K = 1, 2 steps)", toy_run(Path(tmp) / "cli_doc", 2, cli_doc=True)))
        if args.embedded:
            cases.append(measure("README first run (embedded SmolLM2, quick)", args.embedded))
        for case in cases:
            case["old_estimate"] = old_estimate(args.old_src, case["dir"]) if args.old_src else None
            case["dir"] = str(case["dir"]).replace(tmp, "TMP")
    loo = leave_one_out(args.prior_runs)
    ratios = sorted([c["by_phase"][0]["expected"] / c["paid"] for c in cases] + [r["ratio"] for r in loo])
    args.out.write_text(json.dumps({"cases": cases, "prior_leave_one_out": loo,
                                    "ratio_before_the_run": {"min": ratios[0], "median": ratios[len(ratios) // 2],
                                                             "max": ratios[-1]} if ratios else None},
                                   indent=2) + "\n")
    if loo:
        print("| embedded run (prior from the others) | paid | expected before the run | estimate / paid |")
        print("|---|---:|---:|---:|")
        for r in loo:
            print(f"| {r['run']} | {r['paid']} | {r['expected']} | {r['ratio']:.2f} |")
        print()
    print("| run | paid | before the run (main) | before the run | after each step / round |")
    print("|---|---:|---:|---:|---|")
    for c in cases:
        steps = ", ".join(f"{r['after']}: {r['expected']} ({r['error']:+.0%})" for r in c["by_phase"][1:-1])
        old = c["old_estimate"]
        before = f"{old['expected']} ({old['expected'] / c['paid'] - 1:+.0%})" if old else "–"
        print(f"| {c['run']} | {c['paid']} | {before} "
              f"| {c['by_phase'][0]['expected']} ({c['by_phase'][0]['error']:+.0%}) | {steps} |")
    print("\n| run | role | estimated before the run (main) | estimated before the run | paid |")
    print("|---|---|---:|---:|---:|")
    for c in cases:
        old_roles = (c["old_estimate"] or {}).get("by_role", {})
        for role, v in c["by_role"].items():
            was = f"{old_roles[role]:.0f}" if role in old_roles else "–"
            print(f"| {c['run']} | {role} | {was} | {v['prior']:.0f} | {v['paid']} |")


if __name__ == "__main__":
    main()
