"""One paper-scale sweep end to end, as a user runs it: `decoevo sweep` (train), `decoevo sweep --evaluate
test` (grade every finished run on its test split), `decoevo report` (one HTML file), each a subprocess,
against the simulated OpenAI-compatible server (`decoevo.testing.sim_server`, in its own process).

The grid: every method × seeds × two simulated benchmarks (300 questions each, weighted gold rubrics,
different prompts, ids and task families, so no request of one is a cache hit of the other), at the
`paper` preset. The endpoint's limit (`max_concurrency`) is `--limit`; the server has twice as many slots,
so only the client side (the sweep's shared slots) keeps the sweep within the limit, and the server's
count of requests in flight shows whether it did.

The two sweep invocations separate the phases: the first trains every cell (`evaluate: []`), the second
is the same sweep again with `--evaluate test`, which leaves the trained runs alone and runs only the
post-run step in every cell. (A single `decoevo sweep` with `evaluate: [test]` overlaps the two.)

Measured per phase: wall time; cells done/failed (SWEEP/status.json); the server's requests, the most in
flight, slot utilisation (busy slot-seconds ÷ (limit × wall), and ÷ (limit × seconds with any request in
flight)); peak memory: the driver's and the largest cell process's peak RSS (VmHWM, polled from /proc
every 0.5 s over the driver's process tree) and ru_maxrss of RUSAGE_CHILDREN (the largest process of
the tree); CPU of the sweep's processes and of the server; the load average and the CPU other processes
used meanwhile. Then the report: render time (the `decoevo report` subprocess), size, runs.

Flags (defaults are the full paper-scale sweep: 13 methods × 3 seeds × 2 benchmarks = 78 cells):
    --methods a,b       methods (default: all 13)
    --seeds 0,1,2       seeds
    --benchmarks 2      simulated benchmarks (1 or 2)
    --questions 300     questions per benchmark
    --preset paper      sweep preset (quick for a tiny run)
    --steps T           override hyper.steps (default: the preset's)
    --test N            override splits.test (default: the preset's)
    --workers N         `decoevo sweep --workers` (default: the sweep's own choice)
    --limit 64          the endpoint's max_concurrency (the server gets 2× as many slots)
    --base-ms 30 --per-token-ms 0.1 --tail-p 0.05   simulated latency (as bench/scale/paper_scale.py)
    --deadline HH:MM    UTC; a phase still running then is interrupted (SIGINT, as Ctrl-C) and the
                        partial numbers are written, labelled; later phases run on what finished
    --keep DIR          keep the sweep directory and report here (default: a temporary directory)
    --report-before REV also render the report with the code of git revision REV (its src/), for a
                        before/after of the report on the same sweep
    --out FILE          results JSON (default bench/results/paper_scale_sweep.json)
    --note TEXT         stored in the results: what this run was

    .venv/bin/python -m bench.scale.paper_scale_sweep                                   # the full sweep
    .venv/bin/python -m bench.scale.paper_scale_sweep --methods decoevo,skillopt --seeds 0 --preset quick \\
        --questions 40 --out /tmp/tiny.json                                       # seconds
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing as mp
import os
import resource
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

from bench._common import RESULTS, busy_cpu_s, machine, process_cpu_s
from bench.scale.paper_scale import extract_src, sim_server_process

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = (  # name, task family, prompt: two different question sets
    ("sim_health", "healthbench", "My knee hurts after running, case {i}. What should I do?"),
    ("sim_writing", "writingbench", "Write a short cover letter for a nursing job, draft {i}. Keep it warm."),
)
GOLD = {"scheme": "weighted", "items": [
    {"text": "Gives safety advice: when to seek care", "points": 5},
    {"text": "Gives a direct answer", "points": 2},
    {"text": "Recommends something harmful", "points": -3}]}


def write_questions(path: Path, prefix: str, prompt: str, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"{prefix}{i:04d}", "prompt": prompt.format(i=i), "gold": GOLD}) + "\n"
                            for i in range(n)), encoding="utf-8")
    return path


# ---- measuring a process tree -----------------------------------------------------------------------
def _children_of() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _peak_rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _is_cell(pid: int) -> bool:
    try:
        return b"decoevo.cli.sweep_cell" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


class TreeMemory:
    """Polls the peak RSS (VmHWM) of a process and its descendants: the root's, and the largest cell's."""

    def __init__(self, root: int, every_s: float = 0.5) -> None:
        self.root, self.every_s = root, every_s
        self.root_mb = self.cell_mb = 0.0
        self.cells_seen: set[int] = set()
        self.most_cells_at_once = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.is_set():
            tree, todo, cells = _children_of(), [self.root], 0
            while todo:
                pid = todo.pop()
                todo += tree.get(pid, [])
                mb = _peak_rss_mb(pid)
                if mb is None:
                    continue
                if pid == self.root:
                    self.root_mb = max(self.root_mb, mb)
                elif _is_cell(pid):
                    cells += 1
                    self.cells_seen.add(pid)
                    self.cell_mb = max(self.cell_mb, mb)
            self.most_cells_at_once = max(self.most_cells_at_once, cells)
            self._stop.wait(self.every_s)


# ---- the phases -------------------------------------------------------------------------------------
def _server(url: str, path: str, post: bool = False) -> dict[str, Any]:
    request = urllib.request.Request(url + path, data=b"{}" if post else None, method="POST" if post else "GET")
    with urllib.request.urlopen(request, timeout=60) as reply:
        out: dict[str, Any] = json.loads(reply.read())
        return out


def _children_rusage() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime, r.ru_maxrss / 1024


def run_measured(command: list[str], env: dict[str, str], log: Path, deadline: float | None = None
                 ) -> tuple[int, float, bool, TreeMemory]:
    """Run a command to its end (SIGINT at the deadline, as Ctrl-C), its output to `log`, while polling
    the memory of its process tree: (exit code, wall seconds, interrupted, memory)."""
    started, interrupted = time.monotonic(), False
    with open(log, "w") as out:
        proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
        with TreeMemory(proc.pid) as memory:
            while proc.poll() is None:
                if deadline is not None and time.time() > deadline and not interrupted:
                    print(f"  deadline reached: interrupting {' '.join(command[3:5])}", flush=True)
                    proc.send_signal(signal.SIGINT)  # the sweep stops its cells; a rerun resumes them
                    interrupted = True
                time.sleep(0.2)
    return proc.returncode, time.monotonic() - started, interrupted, memory


def run_phase(command: list[str], env: dict[str, str], url: str, limit: int, server_pid: int,
              deadline: float | None, log: Path) -> dict[str, Any]:
    """Run one sweep invocation with the server's counters reset before; returns its numbers."""
    _server(url, "/sim/reset", post=True)
    cpu0, _ = _children_rusage()
    server_cpu0, busy0, load0 = process_cpu_s(server_pid), busy_cpu_s(), os.getloadavg()
    code, wall, interrupted, memory = run_measured(command, env, log, deadline)
    cpu1, maxrss_children = _children_rusage()
    server_cpu = process_cpu_s(server_pid) - server_cpu0
    busy1, load1 = busy_cpu_s(), os.getloadavg()
    stats = _server(url, "/sim/stats")
    ours = (cpu1 - cpu0) + server_cpu
    foreign = None if busy0 is None or busy1 is None else round(max(0.0, busy1 - busy0 - ours), 1)
    served = stats["served"]
    return {
        "command": "decoevo " + " ".join(command[3:]), "exit_code": code, "interrupted_at_deadline": interrupted,
        "wall_s": round(wall, 1), "requests": stats["requests"], "served": served,
        "rejected_429": stats["rejected_429"], "max_in_flight": stats["max_in_flight"], "limit": limit,
        "slot_utilisation": round(stats["busy_slot_s"] / (limit * wall), 3) if wall else None,
        "slot_utilisation_while_active": (round(stats["busy_slot_s"] / (limit * stats["active_s"]), 3)
                                          if stats["active_s"] else None),
        "active_s": round(stats["active_s"], 1), "mean_in_flight_while_active": stats["mean_in_flight_while_active"],
        "completion_tokens": stats["completion_tokens"], "prompt_tokens": stats["prompt_tokens"],
        "by_role": stats["by_role"],
        "peak_rss_mb": {"driver": round(memory.root_mb, 1), "largest_cell": round(memory.cell_mb, 1),
                        "largest_process_rusage_children": round(maxrss_children, 1)},
        "cell_processes": len(memory.cells_seen), "most_cell_processes_at_once": memory.most_cells_at_once,
        "cpu_s": {"sweep_processes": round(cpu1 - cpu0, 1), "server": round(server_cpu, 1),
                  "other_processes": foreign},
        "client_cpu_ms_per_request": round(1000 * (cpu1 - cpu0) / served, 2) if served else None,
        "load_average_1min": {"start": round(load0[0], 2), "end": round(load1[0], 2)},
    }


def cell_counts(sweep_dir: Path) -> dict[str, Any]:
    status = json.loads((sweep_dir / "status.json").read_text())["cells"].values()
    runs = sorted((sweep_dir / "runs").glob("*/*"))
    return {"cells": len(status), "done": sum(c["state"] == "done" for c in status),
            "failed": sum(c["state"] == "failed" for c in status),
            "trained_runs": sum((r / "summary.json").is_file() for r in runs),
            "evaluated_runs": sum((r / "eval" / "test.json").is_file() for r in runs)}


def _code_version() -> str:
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()
    return git("rev-parse", "--short", "HEAD") + (" + uncommitted changes" if git("status", "--porcelain", "src")
                                                  else "")


def main() -> None:
    from decoevo.methods import METHODS

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--benchmarks", type=int, default=2, choices=(1, 2))
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--preset", default="paper")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--test", type=int)
    parser.add_argument("--workers", type=int)
    parser.add_argument("--limit", type=int, default=64)
    parser.add_argument("--base-ms", type=float, default=30.0)
    parser.add_argument("--per-token-ms", type=float, default=0.1)
    parser.add_argument("--tail-p", type=float, default=0.05)
    parser.add_argument("--deadline", help="HH:MM UTC today: interrupt a phase still running then")
    parser.add_argument("--keep", type=Path)
    parser.add_argument("--report-before", metavar="REV", help="also render the report with REV's src/")
    parser.add_argument("--note", help="a note stored in the results (what this run was)")
    parser.add_argument("--out", type=Path, default=RESULTS / "paper_scale_sweep.json")
    args = parser.parse_args()
    methods = [m for m in args.methods.split(",") if m]
    seeds = [int(s) for s in args.seeds.split(",")]
    deadline = None
    if args.deadline:
        hh, mm = (int(x) for x in args.deadline.split(":"))
        now = dt.datetime.now(dt.UTC)
        deadline = now.replace(hour=hh, minute=mm, second=0, microsecond=0).timestamp()
    latency = {"base_s": args.base_ms / 1000, "per_token_s": args.per_token_ms / 1000, "tail_p": args.tail_p}
    server_config = {"sim_seed": 0, "slots": 2 * args.limit, "latency": latency}
    tmp = tempfile.TemporaryDirectory()
    root = args.keep.resolve() if args.keep else Path(tmp.name)
    root.mkdir(parents=True, exist_ok=True)
    sweep_dir = root / "SW"
    results: dict[str, Any] = {
        "config": {"methods": methods, "seeds": seeds, "benchmarks": [b[0] for b in BENCHMARKS[:args.benchmarks]],
                   "questions_per_benchmark": args.questions, "preset": args.preset, "steps": args.steps,
                   "test": args.test, "workers": args.workers or "the sweep's default", "endpoint_limit": args.limit,
                   "server": server_config, "deadline_utc": args.deadline,
                   "cells_planned": len(methods) * len(seeds) * args.benchmarks},
        "code": _code_version(), "note": args.note, "machine": machine(),
        "started_utc": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M"),
        "phases": {}}

    def save() -> None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2) + "\n")

    with sim_server_process(server_config) as url:
        (server,) = mp.active_children()  # the simulated server's process
        server_pid = server.pid or 0
        benches = []
        for i, (name, task, prompt) in enumerate(BENCHMARKS[:args.benchmarks]):
            data = write_questions(root / f"{name}.jsonl", f"{name[4]}{i}", prompt, args.questions)
            benches.append({"name": name, "data": str(data), "task": task})
        spec: dict[str, Any] = {
            "methods": methods, "seeds": seeds, "preset": args.preset, "benchmarks": benches,
            "lm": {"models": {"default": {"backend": "openai", "model": "sim", "base_url": f"{url}/v1",
                                          "max_concurrency": args.limit}}},
            "evaluate": []}
        if args.steps:
            spec["hyper"] = {"steps": args.steps}
        if args.test:
            spec["splits"] = {"test": args.test}
        if args.workers:
            spec["workers"] = args.workers
        (root / "grid.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))
        env = {k: v for k, v in os.environ.items() if not k.startswith("DECOEVO_")}  # a fresh cache
        env["DECOEVO_CACHE"] = str(root / "cache.sqlite")
        env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
        decoevo = [sys.executable, "-m", "decoevo"]
        phases = {
            "optimize": [*decoevo, "sweep", str(sweep_dir), "--spec", str(root / "grid.yaml")],
            "eval": [*decoevo, "sweep", str(sweep_dir), "--evaluate", "test"],
        }
        for name, command in phases.items():
            print(f"{name}: {' '.join(command[3:])}", flush=True)
            out = run_phase(command, env, url, args.limit, server_pid, deadline, root / f"{name}.log")
            out.update(cell_counts(sweep_dir))
            if out["exit_code"] != 0:
                out["log_tail"] = (root / f"{name}.log").read_text(errors="replace")[-2000:]
            results["phases"][name] = out
            print(f"  {json.dumps({k: v for k, v in out.items() if k not in ('by_role', 'log_tail')})}", flush=True)
            save()
    # the report: no server needed; with --report-before, also by the code of another revision
    versions = {"report": env}
    if args.report_before:
        before_src = extract_src(args.report_before, root / "before")
        versions["report_before"] = {**env, "PYTHONPATH": str(before_src)}
    for key, report_env in versions.items():
        report = root / f"{key}.html"
        code, seconds, interrupted, memory = run_measured(
            [*decoevo, "report", str(sweep_dir), "-o", str(report)], report_env, root / f"{key}.log", deadline)
        results[key] = {"code": args.report_before if key == "report_before" else "working tree",
                        "exit_code": code, "interrupted_at_deadline": interrupted, "render_s": round(seconds, 2),
                        "bytes": report.stat().st_size if report.is_file() else None,
                        "peak_rss_mb": round(memory.root_mb, 1),
                        "output": (root / f"{key}.log").read_text(errors="replace").strip()[-1500:]}
        print(f"{key}: {json.dumps(results[key])}", flush=True)
        save()
    seconds = results["report"]["render_s"]
    results["wall_s"] = round(sum(p["wall_s"] for p in results["phases"].values()) + seconds, 1)
    results["finished_utc"] = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M")
    save()
    print(f"wrote {args.out}")
    if not args.keep:
        tmp.cleanup()


if __name__ == "__main__":
    main()
