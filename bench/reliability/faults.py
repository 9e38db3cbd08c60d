"""Fault tolerance of a real `decoevo run` process: the toy world behind `decoevo.testing.fault_proxy`.

For each fault profile, one fault-free reference run, then one run per proxy seed through the proxy
(each with a fresh cache, so every request is paid and can be hit). A run that stops on an
infrastructure failure (a request that exhausted its retries) is continued with `decoevo resume`
through the same proxy, as a user would. Per run: faults injected by kind, what the run's ledger
counted (retries, repairs, failures by category), the repair requests the server was paid for, voided
steps, and whether its final state equals the reference's. After a stop, the ledger is the last
checkpoint's, so the retries of the interrupted step are not in it.

A step voided by an output that stayed invalid after bounded repair makes a run differ from the
reference on purpose (fail closed): the check then is that every step is either decided from
scores or logged as failed with a category, and no score is 0.0 (which the toy world never gives).
A failed call's replies are evicted from the cache, so a later identical request is paid again.

The client's timeout is 1 s: on a loaded machine some exchanges take longer than that without any
injected fault, so the run's retries exceed the injected transport faults and a request can meet six
failures in a row (a stop) that are partly real timeouts. An output fault injected into such an
exchange is never read by the client (`unseen`), so it needs no repair.

Columns: reqs (requests the proxy saw), the faults injected by kind, retry / repair / parse (the run's
ledger), paid (repair requests the server answered), infra (stops on exhausted retries), unsn (output
faults in replies the client never read), void (steps and rounds voided), resum (resumes), match (final
state and
every event equal the fault-free run's; a run with no checkpoint is not finished and does not match).

    .venv/bin/python -m bench.reliability.faults                    # both profiles, seeds 0-4, 8 steps
    .venv/bin/python -m bench.reliability.faults --seeds 0,1 --steps 4 --profiles ci
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from decoevo.lm import LMConfig, ModelSpec
from decoevo.testing.fake_openai import FakeOpenAI
from decoevo.testing.fault_proxy import OUTPUT_FAULTS, TRANSPORT_FAULTS, FaultProxy, FaultRates
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import REPAIR_PREFIX, toy_run_args, toy_server, write_toy_questions

PROFILES = {
    # the rates tests/test_faults.py uses
    "ci": FaultRates(rate_limit=0.10, server_error=0.05, timeout=0.05, truncate=0.02, broken_json=0.025,
                     wrong_schema=0.025),
    # about twice as many faults: some requests exhaust their retries (the run stops and is resumed)
    "heavy": FaultRates(rate_limit=0.15, server_error=0.10, timeout=0.05, truncate=0.05, broken_json=0.05,
                        wrong_schema=0.05),
    # mostly bad outputs: some exhaust their repairs, and their steps are voided (so the run differs)
    "outputs": FaultRates(rate_limit=0.05, broken_json=0.15, wrong_schema=0.15),
}
CLIENT = ("lm.models.default.timeout_s=1", "lm.models.default.backoff_base_s=0.01",
          "lm.models.default.backoff_cap_s=0.05")
KINDS = FaultRates.kinds()


def cli(args: list[str], cache: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DECOEVO_CACHE": str(cache)}
    return subprocess.run([sys.executable, "-m", "decoevo", *args], env=env, capture_output=True, text=True,
                          timeout=1800)


def events(run_dir: Path) -> list[dict[str, Any]]:
    # without times and the start's configuration (its base_url is the proxy's)
    return [{k: v for k, v in json.loads(line).items() if k not in ("t", "config")}
            for line in (run_dir / "events.jsonl").read_text().splitlines()]


def unscored_failures(evs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events that are neither a decision computed from scores nor a failure logged with a category."""
    bad = []
    for e in evs:
        kind = e["event"]
        if kind.endswith("_failed"):
            ok = e.get("category") in ("parse", "refusal", "infrastructure")
        elif kind == "inner_step":
            # the toy world's rubrics always credit something: a 0.0 could only come from a failed call
            scores = [*e.get("batch_scores", {}).values(), e.get("J_incumbent"), e.get("J_candidate")]
            ok = bool(e.get("batch_scores")) and ("J_candidate" in e or "note" in e) and 0.0 not in scores
        elif kind == "outer_round":
            ok = "deltas" in e or "policy" in e
        else:
            ok = kind in ("start", "resume", "finish", "budget_stop")
        if not ok:
            bad.append(e)
    return bad


def faulty_run(upstream: FakeOpenAI, url: str, data: Path, root: Path, steps: int, profile: str, seed: int
               ) -> dict[str, Any]:
    upstream.requests.clear()
    proxy = FaultProxy(url, PROFILES[profile], seed=seed, hold_s=5)
    name = f"{profile}-s{seed}"
    assert not (root / name).exists(), name
    started = time.monotonic()
    resumes = infra_stops = 0
    with serve_app(proxy.app()) as proxied:
        proc = cli(toy_run_args(f"{proxied}/v1", data, root, name, steps=steps, sets=CLIENT), root / f"{name}.sqlite")
        while proc.returncode != 0 and resumes < 5 and (root / name / "config.yaml").is_file():
            # A request exhausted its retries and the run stopped (exit 2). Its ledger is the last
            # checkpoint's, so the stop is counted here. The run's config names the proxy's URL, which
            # stays up: resume goes through it again.
            infra_stops += "(infrastructure)" in proc.stderr + proc.stdout
            resumes += 1
            proc = cli(["resume", str(root / name)], root / f"{name}.sqlite")
    run_dir = root / name
    ledger = json.loads((run_dir / "ledger.json").read_text())["total"] if (run_dir / "ledger.json").is_file() else {}
    evs = events(run_dir) if (run_dir / "events.jsonl").is_file() else []
    return {
        "seed": seed, "exit": proc.returncode, "resumes": resumes, "infra_stops": infra_stops,
        "seconds": round(time.monotonic() - started, 1),
        **proxy.summary(),
        "paid_repairs": len({json.dumps(b, sort_keys=True) for b in upstream.requests
                             if str(b["messages"][-1]["content"]).startswith(REPAIR_PREFIX)}),
        "ledger": {"paid_calls": ledger.get("calls"), "retries": ledger.get("retries"),
                   "repairs": ledger.get("repairs"), "failures": ledger.get("failures")},
        "voided": [{"event": e["event"], "category": e.get("category"), "role": e.get("role")}
                   for e in evs if e["event"].endswith("_failed")],
        "unscored_failures": unscored_failures(evs),
        # A run that stopped before its first checkpoint (every resume stopped again) has no state: not finished.
        "state": json.loads((run_dir / "checkpoint.json").read_text())["state"]
        if (run_dir / "checkpoint.json").is_file() else None,
        "events": [e for e in evs if e["event"] != "resume"],
    }


def survived(run: dict[str, Any]) -> dict[str, dict[str, int]]:
    """Faults by category: injected, survived inside the run (retried, or repaired), survived by a stop
    and `decoevo resume`, lost, and unseen (the client never read the faulty reply).

    Transport: a stop means one request failed 1 + max_retries attempts in a row. On a slow machine some
    of those attempts are real client timeouts, not injected faults, so a stop accounts for at most that
    many injected faults (an upper bound on `by_resume`), and never for more than were injected.

    Output: a broken reply the client parsed was followed by one paid repair request, except the last
    one of a call that failed (1 + max_repairs broken replies in a row; the ledger counts each failed
    call once, its replies are evicted from the cache). A broken reply can also go unread: the proxy
    injects it into the upstream's answer, but the client had already timed out on that exchange (and
    retried it), or the run stopped while it was in flight. Those are `unseen`, not failures."""
    per_stop, repairs = 1 + ModelSpec().max_retries, LMConfig().max_repairs
    transport = sum(run["injected"][k] for k in TRANSPORT_FAULTS)
    output = sum(run["injected"][k] for k in OUTPUT_FAULTS)
    stopped = min(transport, per_stop * run["infra_stops"])
    lost_transport = min(stopped, per_stop) if run["exit"] != 0 else 0  # the last stop was not resumed
    failed = run["failed_calls"]
    lost_output = (1 + repairs) * failed
    repaired = max(0, run["paid_repairs"] - repairs * failed)
    return {
        "transport": {"injected": transport, "in_run": transport - stopped,
                      "by_resume": stopped - lost_transport, "lost": lost_transport, "unseen": 0},
        "output": {"injected": output, "in_run": repaired, "by_resume": 0, "lost": lost_output,
                   "unseen": max(0, output - repaired - lost_output)},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2,3,4")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--profiles", default=",".join(PROFILES))
    ap.add_argument("--out", type=Path, default=RESULTS / "faults.json")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    report: dict[str, Any] = {"machine": machine(), "steps": args.steps, "client": list(CLIENT), "profiles": {}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        data = write_toy_questions(root / "toy.jsonl")
        upstream = toy_server()
        with serve_app(upstream.app()) as url:
            ref = cli(toy_run_args(f"{url}/v1", data, root, "reference", steps=args.steps), root / "ref.sqlite")
            assert ref.returncode == 0, ref.stdout + ref.stderr
            ref_state, ref_events = json.loads((root / "reference/checkpoint.json").read_text())["state"], \
                events(root / "reference")
            for profile in args.profiles.split(","):
                runs = []
                for seed in seeds:
                    run = faulty_run(upstream, url, data, root, args.steps, profile, seed)
                    state, evs = run.pop("state"), run.pop("events")
                    run["finished"] = run["exit"] == 0 and state is not None
                    run["matched"] = run["finished"] and state == ref_state and evs == ref_events
                    run["failed_calls"] = (run["ledger"]["failures"] or {}).get("parse", 0)
                    run["survived"] = survived(run)
                    runs.append(run)
                    print(f"{profile} seed {seed}: exit {run['exit']} resumes {run['resumes']} "
                          f"matched {run['matched']} in {run['seconds']}s", flush=True)
                report["profiles"][profile] = {"rates": PROFILES[profile].__dict__, "runs": runs}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    short = {"rate_limit": "429", "server_error": "500", "timeout": "t/o", "truncate": "trunc",
             "broken_json": "brokn", "wrong_schema": "schem"}
    print(f"\n{'profile':7} {'seed':>4} {'reqs':>5} " + " ".join(f"{short[k]:>5}" for k in KINDS)
          + f" {'retry':>5} {'repair':>6} {'paid':>4} {'infra':>5} {'parse':>5} {'unsn':>4} {'void':>4}"
          f" {'resum':>5} {'match':>5}")
    for profile, block in report["profiles"].items():
        for r in block["runs"]:
            f = r["ledger"]["failures"] or {}
            print(f"{profile:7} {r['seed']:>4} {r['requests']:>5} "
                  + " ".join(f"{r['injected'][k]:>5}" for k in KINDS)
                  + f" {r['ledger']['retries']:>5} {r['ledger']['repairs']:>6} {r['paid_repairs']:>4} "
                  f"{r['infra_stops']:>5} {f.get('parse', 0):>5} {r['survived']['output']['unseen']:>4} "
                  f"{len(r['voided']):>4} "
                  f"{r['resumes']:>5} {r['matched']!s:>5}")
    print(f"\n{'profile':7} {'fault':13} {'injected':>8}")
    for profile, block in report["profiles"].items():
        for k in KINDS:
            print(f"{profile:7} {k:13} {sum(r['injected'][k] for r in block['runs']):>8}")
    print(f"\n{'profile':7} {'category':10} {'injected':>8} {'survived in run':>15} {'after resume':>12} {'lost':>5}"
          f" {'unseen':>6}")
    for profile, block in report["profiles"].items():
        for cat in ("transport", "output"):
            tot = {f: sum(r["survived"][cat][f] for r in block["runs"])
                   for f in ("injected", "in_run", "by_resume", "lost", "unseen")}
            print(f"{profile:7} {cat:10} {tot['injected']:>8} {tot['in_run']:>15} {tot['by_resume']:>12} "
                  f"{tot['lost']:>5} {tot['unseen']:>6}")
    bad = [r for b in report["profiles"].values() for r in b["runs"]
           if r["unscored_failures"] or not r["finished"]]
    print(f"\nruns with an unlogged failure or that did not finish: {len(bad)}; wrote {args.out}")


if __name__ == "__main__":
    main()
