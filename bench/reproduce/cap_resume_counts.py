"""`decoevo reproduce` against the simulated server (quick, seed 0, Table 1: HealthBench and its LLMEval-Med
transfer, priced at $50 per million tokens): a $0.50 cap stop, the resumed plan (--plan-only), the resume at
$1000; after each, what the plan, the ledgers (training RUN/ledger.json, evaluation RUN/eval/ledger.json and
the per-evaluation ledger-*.json), OUT/spend.log and the server each counted (issue 35 item 3).

    nice -n 10 .venv/bin/python -m bench.reproduce.cap_resume_counts WORKDIR   # ~15 min on a loaded 2-core box
"""
import json
import os
import re
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from bench._common import RESULTS, machine
from decoevo.cli import app
from decoevo.lm.spend import read_state
from decoevo.testing.server import serve_app
from decoevo.testing.sim_model import LatencyModel
from decoevo.testing.sim_server import SimServer, SimServerConfig
from tests.test_reproduce import write

tmp = Path(sys.argv[1])
tmp.mkdir(parents=True, exist_ok=True)
os.environ["DECOEVO_CACHE"] = str(tmp / "cache.sqlite")
server = SimServer(SimServerConfig(seed=0, slots=32, latency=LatencyModel.fixed(0.0)))
hb, med = write(tmp / "healthbench.jsonl", 30), write(tmp / "llmeval_med.jsonl", 5)
out = tmp / "out"

def ledgers():
    def tot(paths):
        c = u = 0.0
        for p in paths:
            t = json.loads(p.read_text())["total"]
            c += t["calls"]
            u += t["cost_usd"]
        return int(c), round(u, 4)
    runs = list(out.glob("sweeps/*/runs/*/*"))
    return {"training RUN/ledger.json": tot([r / "ledger.json" for r in runs if (r / "ledger.json").is_file()]),
            "evaluation RUN/eval/ledger.json": tot([r / "eval" / "ledger.json" for r in runs
                                                     if (r / "eval" / "ledger.json").is_file()]),
            "evaluation RUN/eval/ledger-*.json": tot([p for r in runs for p in (r / "eval").glob("ledger-*.json")])}

def spend():
    path = out / "spend.log"
    lines = path.read_text().splitlines() if path.is_file() else []
    st = read_state(path)
    return {"settled requests": sum(1 for line in lines if line.startswith("s ")), "total $": round(st.total, 4)}

steps: list[dict] = []
with serve_app(server.app()) as url:
    priced = {"backend": "openai", "base_url": f"{url}/v1", "input_price_per_mtok": 50.0, "output_price_per_mtok": 50.0}
    models = tmp / "models.yaml"
    models.write_text(json.dumps({"solver": {**priced, "model": "sim"}, "grader": {**priced, "model": "sim-grader"}}))
    base = ["reproduce", str(out), "--models", str(models), "--preset", "quick", "--seeds", "0", "--benchmarks",
            "healthbench", "--tables", "1", "--data", f"healthbench={hb}:jsonl", "--data", f"llmeval_med={med}:jsonl"]
    for label, extra in (("first (cap 0.5)", ["--yes", "--workers", "2", "--max-cost", "0.5"]),
                         ("resume plan-only", ["--plan-only", "--max-cost", "1000"]),
                         ("resume (cap 1000)", ["--yes", "--workers", "2", "--max-cost", "1000"])):
        before = server.stats.requests
        r = CliRunner().invoke(app, base + extra)
        text = " ".join(r.output.split())
        plan = re.search(r"(\d+ runs \([^)]*\), \d+ still to run; projected paid calls: [^,]*, [^(]*)", text)
        steps.append({"step": label, "exit": r.exit_code, "plan": plan.group(1) if plan else None,
                          "server requests this step": server.stats.requests - before,
                          "server requests total": server.stats.requests, "spend.log": spend(),
                          "ledgers (calls, $)": ledgers()})
        print(json.dumps(steps[-1], ensure_ascii=False), flush=True)
(RESULTS / "reproduce_cap_resume.json").write_text(json.dumps(
    {"machine": machine(), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "steps": steps},
    ensure_ascii=False, indent=1) + "\n")
