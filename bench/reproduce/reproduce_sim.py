"""The paper's whole experiment, `decoevo reproduce`, end to end against the simulated OpenAI-compatible
server (its own process), as a user runs it: one subprocess, then the report and a screenshot of its claims.

Everything of the paper at small sizes: Tables 1-5 and Figure 3 on three simulated source benchmarks
(custom JSONL with weighted gold rubrics, named healthbench / writingbench / researchqa) with the two
transfers (LLMEval-Med and EQ-Bench CW in their own formats when their sample files are given, else
simulated JSONL), `--seeds` seeds (the paper: 5), the `quick` preset plus a diagnostic split for Figure 3.
The backbone and the separate grader are the simulator under two names, priced as GPT-4o
($2.50 / $10 per million input / output tokens) so the projection prints dollars and the ledgers count them.

Measured: wall time; runs; projected paid calls and dollars (what the command printed before spending)
against the actual paid calls (the server's request count) and dollars (training + evaluation ledgers);
a second invocation (resume) and its calls (must be 0); the claims' verdicts. The simulator's replies say
nothing about quality: the verdicts are whatever this run produced, shown as they are.

Each seed's projection is asked for alone first (the command without `--yes` prints it and stops), and
compared with that seed's ledgers; each run's "expected" line with the calls the run used. `--world` runs
the server in one of the cost benches' worlds (bench/cost/cost_worlds.py); the results file is
reproduce_sim.json for `default`, else reproduce_sim_<world>.json.

    .venv/bin/python -m bench.reproduce.reproduce_sim --seeds 0,1,2 --world held_out   # about 3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from bench._common import RESULTS, machine
from bench.scale.paper_scale import sim_server_process

ROOT = Path(__file__).resolve().parents[2]
GOLD = {
    "scheme": "weighted",
    "items": [
        {"text": "Gives safety advice: when to seek care", "points": 5},
        {"text": "Gives a direct answer", "points": 2},
        {"text": "Covers what the question leaves open", "points": 3},
        {"text": "Recommends something harmful", "points": -3},
    ],
}
PROMPTS = {
    "healthbench": "My knee hurts after running, case {i}. What should I do?",
    "writingbench": "Write a short product announcement for item {i}.",
    "researchqa": "What is known about method {i} for sparse retrieval?",
    "llmeval_med": "A patient asks about dosage question {i}.",
    "eqbench_cw": "Write a scene about a lighthouse keeper, variation {i}.",
}
PRICE = {"input_price_per_mtok": 2.5, "output_price_per_mtok": 10.0}
HIDE_ALL_BUT_CLAIMS = (
    "<style>header.top, nav.toc, main > section:not(#claims), main > h2 "
    "{ display: none !important; } .layout { display: block !important; } "
    "main { max-width: 1200px; margin: 0 auto; }</style>"
)


def write_questions(path: Path, name: str, n: int) -> Path:
    path.write_text(
        "".join(
            json.dumps({"id": f"{name[:3]}{i:04d}", "prompt": PROMPTS[name].format(i=i), "gold": GOLD}) + "\n"
            for i in range(n)
        ),
        encoding="utf-8",
    )
    return path


def stats(url: str) -> dict[str, Any]:
    with urllib.request.urlopen(url + "/sim/stats", timeout=30) as reply:
        out: dict[str, Any] = json.loads(reply.read())
        return out


def _runs(out: Path, seed: int | None) -> list[Path]:
    return [p for p in out.glob("sweeps/*/runs/*/*") if p.is_dir() and (seed is None or p.name.endswith(f"-s{seed}"))]


def ledger_calls(out: Path, seed: int | None = None) -> tuple[int, int]:
    """(training, evaluation) paid calls over every run of the experiment (or of one seed), from the
    ledgers: the projection's two phases."""
    runs = _runs(out, seed)
    train = sum(json.loads((r / "ledger.json").read_text())["total"]["calls"] for r in runs
                if (r / "ledger.json").is_file())
    evaluate = sum(json.loads(p.read_text())["total"]["calls"] for r in runs for p in r.glob("eval/ledger-*.json"))
    return train, evaluate


def parity(out: Path) -> dict[str, float]:
    """Effective tokens of each HealthBench run relative to its paired DecoEvo run (Table 4's unit)."""
    runs = out / "sweeps" / "healthbench" / "runs" / "healthbench"
    total = {p.parent.name: json.loads(p.read_text())["total"] for p in runs.glob("*/ledger.json")}
    ratios = {}
    for name, t in total.items():
        method, seed = name.rsplit("-s", 1)
        base = total.get(f"decoevo-s{seed}")
        if base and method != "decoevo":
            ratios[name] = round((t["tokens"] + t["inherited_tokens"]) / (base["tokens"] + base["inherited_tokens"]), 3)
    return ratios


def ledger_dollars(out: Path, seed: int | None = None) -> tuple[float, float]:
    """(training, evaluation) dollars paid over every run of the experiment (or of one seed)."""
    train = evaluate = 0.0
    for run in _runs(out, seed):
        if (run / "ledger.json").is_file():
            train += json.loads((run / "ledger.json").read_text())["total"].get("cost_usd", 0.0)
        for ledger in run.glob("eval/ledger-*.json"):
            evaluate += json.loads(ledger.read_text())["total"].get("cost_usd", 0.0)
    return train, evaluate


PLAN = re.compile(r"~([\d,]+) training \+ ~([\d,]+) evaluation = ~([\d,]+), about \$([\d,.]+)")


def projected(text: str) -> dict[str, Any] | None:
    """The projection the command printed before spending."""
    match = PLAN.search(" ".join(text.split()))
    if match is None:
        return None
    n = [float(match.group(i).replace(",", "")) for i in range(1, 5)]
    return {"training_calls": int(n[0]), "evaluation_calls": int(n[1]), "calls": int(n[2]), "dollars": n[3]}


def expected_lines(out: Path) -> list[dict[str, Any]]:
    """Each run's "expected" line (what `decoevo run` prints before it starts, cli/run_progress.py) against
    what the run used: its paid calls plus those it inherited from the seed's shared cache, i.e. what it
    would have paid alone."""
    from decoevo.cli.run_progress import expected_calls
    from decoevo.engine.config import RunConfig

    rows = []
    for run in sorted(_runs(out, None)):
        if not (run / "ledger.json").is_file():
            continue
        config = RunConfig.model_validate(yaml.safe_load((run / "config.yaml").read_text()))
        total = json.loads((run / "ledger.json").read_text())["total"]
        used = total["calls"] + total["inherited_calls"]
        expected = expected_calls(config)
        rows.append({"run": f"{run.parent.name}/{run.name}", "expected": expected, "used": used,
                     "ratio": round(expected / used, 3) if used else None})
    return rows


def spread(values: list[float]) -> dict[str, float]:
    v = sorted(values)
    return {"min": round(v[0], 3), "median": round(v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1]
            + v[len(v) // 2]) / 2, 3), "max": round(v[-1], 3)} if v else {}


def screenshot(report: Path, png: Path) -> bool:
    exe = shutil.which("chromium")
    if exe is None:
        return False
    page = report.with_name("claims_only.html")
    page.write_text(
        report.read_text(encoding="utf-8").replace("</head>", HIDE_ALL_BUT_CLAIMS + "</head>"), encoding="utf-8"
    )
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--hide-scrollbars",
                f"--user-data-dir={profile}",
                "--window-size=1280,3200",
                f"--screenshot={png}",
                page.as_uri(),
            ],
            capture_output=True,
            timeout=120,
            check=False,
        )
    return png.is_file()


def invoke(out: Path, models: Path, data: list[str], seeds: str, sets: list[str], yes: bool = True,
           preset: str = "quick", extra: tuple[str, ...] = ()) -> tuple[float, str, int]:
    """`decoevo reproduce` as a user types it; without `yes` it prints the plan and its projection and
    stops before spending (stdin is not a terminal)."""
    cmd = [
        sys.executable,
        "-m",
        "decoevo",
        "reproduce",
        str(out),
        "--models",
        str(models),
        "--seeds",
        seeds,
        "--preset",
        preset,
        *extra,
        *(x for s in sets for x in ("--set", s)),
        *(["--yes"] if yes else []),
        *data,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "160"}
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600, check=False,
                          stdin=subprocess.DEVNULL)
    return time.monotonic() - t0, done.stdout + done.stderr, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--questions", type=int, default=40, help="questions per source benchmark")
    parser.add_argument("--transfer-questions", type=int, default=8)
    parser.add_argument("--llmeval-med", help="an LLMEval-Med file (its own format) for the transfer")
    parser.add_argument("--eqbench-cw", help="an EQ-Bench CW prompts file or folder for the transfer")
    parser.add_argument(
        "--steps",
        type=int,
        default=6,
        help="inner steps T (quick: 2, after which DecoEvo's "
        "first generator round could not yet change any solver step)",
    )
    parser.add_argument("--test", type=int, default=10, help="test questions per source benchmark")
    parser.add_argument("--keep", type=Path, help="keep the experiment directory here")
    parser.add_argument("--world", default="default",
                        help="the simulated world (bench/cost/cost_worlds.py: default, held_out, f<seed>w<i>)")
    parser.add_argument("--out", type=Path, help="default: bench/results/reproduce_sim.json (world default), "
                        "else reproduce_sim_<world>.json")
    parser.add_argument("--screenshot", type=Path, default=ROOT / "docs" / "reproduce-claims.png")
    args = parser.parse_args()

    from bench.cost.cost_worlds import world

    sim_world, sim_seed = world(args.world)
    args.out = args.out or RESULTS / ("reproduce_sim.json" if args.world == "default"
                                      else f"reproduce_sim_{args.world}.json")
    root = args.keep or Path(tempfile.mkdtemp(prefix="repro-"))
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    server = {"sim_seed": sim_seed, "slots": 64, "latency": {"base_s": 0.03, "per_token_s": 0.0001, "tail_p": 0.05},
              "world": dataclasses.asdict(sim_world) if sim_world is not None else None}
    with sim_server_process(server) as url:
        data = []
        for name in ("healthbench", "writingbench", "researchqa"):
            data += ["--data", f"{name}={write_questions(root / f'{name}.jsonl', name, args.questions)}:jsonl"]
        for name, given in (("llmeval_med", args.llmeval_med), ("eqbench_cw", args.eqbench_cw)):
            path = given or write_questions(root / f"{name}.jsonl", name, args.transfer_questions)
            data += ["--data", f"{name}={path}:{name if given else 'jsonl'}@{args.transfer_questions}"]
        models = root / "models.yaml"
        models.write_text(
            yaml.safe_dump(
                {
                    "solver": {"backend": "openai", "model": "sim-backbone", "base_url": f"{url}/v1", **PRICE},
                    "grader": {"backend": "openai", "model": "sim-grader", "base_url": f"{url}/v1", **PRICE},
                }
            )
        )
        out = root / "experiment"
        sets = ["splits.diagnostic=4", f"splits.test={args.test}", f"hyper.steps={args.steps}"]
        seeds = [int(s) for s in args.seeds.split(",")]
        # each seed's own projection (runs of different seeds share nothing), printed before spending
        alone = {seed: projected(invoke(out, models, data, str(seed), sets, yes=False)[1]) for seed in seeds}
        wall, text, code = invoke(out, models, data, args.seeds, sets)
        served = stats(url)["requests"]
        again_wall, again_text, again_code = invoke(out, models, data, args.seeds, sets)
        resumed_requests = stats(url)["requests"] - served
    train_usd, eval_usd = ledger_dollars(out)
    train_calls, eval_calls = ledger_calls(out)
    per_seed = {}
    for seed in seeds:
        (t_calls, e_calls), (t_usd, e_usd), plan = ledger_calls(out, seed), ledger_dollars(out, seed), alone[seed]
        paid = {"training_calls": t_calls, "evaluation_calls": e_calls, "dollars": round(t_usd + e_usd, 4)}
        per_seed[str(seed)] = {"projected": plan, "paid": paid, "ratio": None if plan is None else {
            k: round(plan[k] / paid[k], 3) if paid[k] else None for k in paid}}
    lines = expected_lines(out)
    verdicts = {
        m.group(2): m.group(1)
        for m in re.finditer(r"^\s*(supported|contradicted|not enough runs|not run)\s+(\S+)\s*$", text, re.M)
    }
    png = args.screenshot
    png.parent.mkdir(parents=True, exist_ok=True)
    shot = screenshot(out / "report.html", png)
    result = {
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "command": f"decoevo reproduce --preset quick {' '.join('--set ' + s for s in sets)} (all tables)",
        "seeds": args.seeds,
        "questions_per_source": args.questions,
        "transfer_questions": args.transfer_questions,
        "exit_code": code,
        "wall_s": round(wall, 1),
        "runs": len(list(out.glob("sweeps/*/runs/*/*/summary.json"))),
        "world": {"name": args.world, "sim_seed": sim_seed, **(server["world"] or {})},
        "projected": projected(text),
        "actual": {
            "calls": served,
            "training_calls": train_calls,
            "evaluation_calls": eval_calls,
            "dollars_training": round(train_usd, 4),
            "dollars_evaluation": round(eval_usd, 4),
            "dollars": round(train_usd + eval_usd, 4),
        },
        "per_seed": per_seed,
        "ratio_spread": {k: spread([r["ratio"][k] for r in per_seed.values() if r["ratio"] and r["ratio"][k]])
                         for k in ("training_calls", "evaluation_calls", "dollars")},
        "expected_lines": {"runs": len(lines), "within_25pct": sum(1 for r in lines if r["ratio"] is not None
                                                                   and 0.75 <= r["ratio"] <= 1.25),
                           "ratio": spread([r["ratio"] for r in lines if r["ratio"] is not None]),
                           "rows": lines},
        "tokens_vs_decoevo": parity(out),
        "rerun": {"exit_code": again_code, "wall_s": round(again_wall, 1), "calls": resumed_requests},
        "verdicts": verdicts,
        "screenshot": (str(png.relative_to(ROOT)) if png.is_relative_to(ROOT) else str(png)) if shot else None,
        "tail": text[-1500:],
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k not in ("tail", "expected_lines", "tokens_vs_decoevo")},
                     indent=2))
    if again_code != 0 or code != 0:
        print(again_text[-3000:], file=sys.stderr)


if __name__ == "__main__":
    main()
