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

    .venv/bin/python -m bench.reproduce.reproduce_sim --seeds 0,1 --keep /tmp/repro    # about 3 minutes on 2 cores
"""

from __future__ import annotations

import argparse
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


def ledger_calls(out: Path) -> tuple[int, int]:
    """(training, evaluation) paid calls over every run of the experiment, from the ledgers: the
    projection's two phases."""
    train = sum(json.loads(p.read_text())["total"]["calls"] for p in out.glob("sweeps/*/runs/*/*/ledger.json"))
    evaluate = sum(json.loads(p.read_text())["total"]["calls"]
                   for p in out.glob("sweeps/*/runs/*/*/eval/ledger-*.json"))
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


def ledger_dollars(out: Path) -> tuple[float, float]:
    """(training, evaluation) effective dollars over every run of the experiment."""
    train = evaluate = 0.0
    for ledger in out.glob("sweeps/*/runs/*/*/ledger.json"):
        train += json.loads(ledger.read_text())["total"].get("cost_usd", 0.0)
    for ledger in out.glob("sweeps/*/runs/*/*/eval/ledger-*.json"):
        evaluate += json.loads(ledger.read_text())["total"].get("cost_usd", 0.0)
    return train, evaluate


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


def invoke(out: Path, models: Path, data: list[str], seeds: str, sets: list[str]) -> tuple[float, str, int]:
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
        "quick",
        *(x for s in sets for x in ("--set", s)),
        "--yes",
        *data,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": "160"}
    t0 = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600, check=False)
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
    parser.add_argument("--out", type=Path, default=RESULTS / "reproduce_sim.json")
    parser.add_argument("--screenshot", type=Path, default=ROOT / "docs" / "reproduce-claims.png")
    args = parser.parse_args()

    root = args.keep or Path(tempfile.mkdtemp(prefix="repro-"))
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    server = {"sim_seed": 0, "slots": 64, "latency": {"base_s": 0.03, "per_token_s": 0.0001, "tail_p": 0.05}}
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
        wall, text, code = invoke(out, models, data, args.seeds, sets)
        served = stats(url)["requests"]
        match = re.search(
            r"~([\d,]+) training \+ ~([\d,]+) evaluation = ~([\d,]+), about \$([\d,.]+)", " ".join(text.split())
        )
        again_wall, again_text, again_code = invoke(out, models, data, args.seeds, sets)
        resumed_requests = stats(url)["requests"] - served
    train_usd, eval_usd = ledger_dollars(out)
    train_calls, eval_calls = ledger_calls(out)
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
        "projected": None
        if match is None
        else {
            "training_calls": int(match.group(1).replace(",", "")),
            "evaluation_calls": int(match.group(2).replace(",", "")),
            "calls": int(match.group(3).replace(",", "")),
            "dollars": float(match.group(4).replace(",", "")),
        },
        "actual": {
            "calls": served,
            "training_calls": train_calls,
            "evaluation_calls": eval_calls,
            "dollars_training": round(train_usd, 4),
            "dollars_evaluation": round(eval_usd, 4),
            "dollars": round(train_usd + eval_usd, 4),
        },
        "tokens_vs_decoevo": parity(out),
        "rerun": {"exit_code": again_code, "wall_s": round(again_wall, 1), "calls": resumed_requests},
        "verdicts": verdicts,
        "screenshot": (str(png.relative_to(ROOT)) if png.is_relative_to(ROOT) else str(png)) if shot else None,
        "tail": text[-1500:],
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: v for k, v in result.items() if k != "tail"}, indent=2))
    if again_code != 0 or code != 0:
        print(again_text[-3000:], file=sys.stderr)


if __name__ == "__main__":
    main()
