"""Crash safety of a real `decoevo run` process: SIGKILL at random points, then `decoevo resume`.

The model is the deterministic toy world behind a real OpenAI-compatible HTTP server on 127.0.0.1
(`decoevo.testing.toy_server`), so the final state of every resumed run can be compared exactly with an
uninterrupted run, and the server's request log shows every request that was sent twice. Requests go
one at a time (max_concurrency=1), so at most the one in flight at the kill may be sent again.

Per kill: the kill point (requests the server had seen when the SIGKILL was sent), whether the resumed
run's final solver and generator skills equal the uninterrupted run's, the requests sent twice with the
same body, and whether calls.jsonl / events.jsonl parse line by line (no torn line) right after the kill
and after the resume. Each kill uses its own fresh request cache, so nothing is served from an earlier run.

    .venv/bin/python -m bench.reliability.crash_resume                       # 30 kills, seed 11, 3 steps
    .venv/bin/python -m bench.reliability.crash_resume --kills 40 --seed 5
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

LOGS = ("calls.jsonl", "events.jsonl")


def cli(args: list[str], cache: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "DECOEVO_CACHE": str(cache)}
    return subprocess.Popen([sys.executable, "-m", "decoevo", *args], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def parses(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except json.JSONDecodeError:
        return False


def torn_lines(path: Path) -> int:
    """Lines of an append-only JSONL log that do not parse as a JSON object (0 for a missing file)."""
    if not path.is_file():
        return 0
    return sum(not parses(line) for line in path.read_text(encoding="utf-8", errors="replace").split("\n")
               if line.strip())


def final_state(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "checkpoint.json").read_text())["state"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=11, help="seeds the kill points")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    server = toy_server()
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp, serve_app(server.app()) as url:
        root = Path(tmp)
        data = write_toy_questions(root / "toy.jsonl")

        def run_args(name: str) -> list[str]:
            return toy_run_args(f"{url}/v1", data, root, name, steps=args.steps,
                                sets=("lm.models.default.max_concurrency=1",))

        t0 = time.monotonic()
        ref = cli(run_args("reference"), root / "ref.sqlite")
        out, _ = ref.communicate(timeout=1800)
        if ref.returncode != 0:
            sys.exit(f"the uninterrupted run failed:\n{out}")
        ref_seconds = time.monotonic() - t0
        reference = final_state(root / "reference")
        total = len(server.requests)
        print(f"uninterrupted run: {total} requests in {ref_seconds:.1f}s; solver v{reference['solver']['version']}, "
              f"generator v{reference['generator']['version']}", flush=True)

        for k in range(args.kills):
            server.requests.clear()
            name, cache = f"killed{k:02d}", root / f"cache{k:02d}.sqlite"
            kill_at = rng.randint(1, total - 1)
            proc = cli(run_args(name), cache)
            deadline = time.monotonic() + 600
            while len(server.requests) < kill_at and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.002)
            finished_first = proc.poll() is not None
            seen = len(server.requests)
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            run_dir = root / name
            torn_at_kill = {log: torn_lines(run_dir / log) for log in LOGS}
            t1 = time.monotonic()
            resumed = cli(["resume", str(run_dir)], cache)
            out, _ = resumed.communicate(timeout=1800)
            bodies = Counter(json.dumps(r, sort_keys=True) for r in server.requests)
            row: dict[str, Any] = {
                "kill": k, "target": kill_at, "requests_seen": seen, "finished_before_kill": finished_first,
                "resume_exit": resumed.returncode, "resume_seconds": round(time.monotonic() - t1, 1),
                "requests_total": len(server.requests),
                "repeated": sum(c - 1 for c in bodies.values() if c > 1),
                "torn_after_kill": torn_at_kill,
                "torn_after_resume": {log: torn_lines(run_dir / log) for log in LOGS},
            }
            if resumed.returncode == 0:
                state = final_state(run_dir)
                events = [json.loads(x)["event"] for x in (run_dir / "events.jsonl").read_text().splitlines()
                          if x.strip() and parses(x)]
                row["matched"] = state["solver"] == reference["solver"] and state["generator"] == reference["generator"]
                row["inner_steps"] = events.count("inner_step")
                row["finished"] = bool(events) and events[-1] == "finish"
            else:
                row.update(matched=False, inner_steps=None, finished=False, error=out[-800:])
            rows.append(row)
            print(f"kill {k:2d}: at request {seen:4d}/{total}  matched={row['matched']}  repeated={row['repeated']}  "
                  f"torn={sum(row['torn_after_kill'].values())}/{sum(row['torn_after_resume'].values())}", flush=True)

    summary = {
        "kills": len(rows),
        "matched": sum(r["matched"] for r in rows),
        "resume_failures": sum(r["resume_exit"] != 0 for r in rows),
        "repeated_requests": sum(r["repeated"] for r in rows),
        "max_repeated_per_kill": max((r["repeated"] for r in rows), default=0),
        "kills_with_a_repeat": sum(r["repeated"] > 0 for r in rows),
        "torn_lines_after_kill": sum(sum(r["torn_after_kill"].values()) for r in rows),
        "torn_lines_after_resume": sum(sum(r["torn_after_resume"].values()) for r in rows),
        "all_steps_logged_once": all(r["inner_steps"] == args.steps and r["finished"] for r in rows),
    }
    result = {"machine": machine(), "seed": args.seed, "steps": args.steps, "reference_requests": total,
              "reference_seconds": round(ref_seconds, 1), "summary": summary, "kills": rows}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "crash_resume.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")

    print()
    print(f"{'kill':>4} {'at req':>7} {'resume':>6} {'match':>5} {'repeat':>6} {'torn@kill':>9} {'torn@end':>8} "
          f"{'steps':>5}")
    for r in rows:
        print(f"{r['kill']:>4} {r['requests_seen']:>7} {r['resume_exit']:>6} {'yes' if r['matched'] else 'NO':>5} "
              f"{r['repeated']:>6} {sum(r['torn_after_kill'].values()):>9} {sum(r['torn_after_resume'].values()):>8} "
              f"{r['inner_steps'] if r['inner_steps'] is not None else '-':>5}")
    print(f"\n{summary['matched']}/{summary['kills']} resumed runs match the uninterrupted run; "
          f"{summary['repeated_requests']} requests sent twice in all (at most {summary['max_repeated_per_kill']} "
          f"per kill); torn log lines: {summary['torn_lines_after_kill']} after the kills, "
          f"{summary['torn_lines_after_resume']} after the resumes. -> {RESULTS / 'crash_resume.json'}")


if __name__ == "__main__":
    main()
