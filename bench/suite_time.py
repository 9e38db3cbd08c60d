"""How long the default test suite takes: runs `python -m pytest --durations=N` the way scripts/test.sh does
(`-n 2 --dist loadfile`, the default `-m 'not slow'`) or reads the output of such a run, and writes the wall
time, the counts and the slowest tests to a JSON file. With `--timeline DIR` the run also loads the
bench/suite_timeline.py plugin and the entry gets, per test file, its worker, when it started and ended, its CPU
and the subprocesses its tests started (and `--from-timeline DIR` reads such a folder of an earlier run).

    .venv/bin/python -m bench.suite_time --label after --timeline /tmp/tl --out bench/results/test_suite_time.json
    .venv/bin/python -m bench.suite_time --label before --from-output before.txt [--from-timeline /tmp/tl]

Each label is one entry of the file (a rerun with the same label replaces it). The machine is shared: the
1-minute load average before and after the run is recorded with it."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

DURATION = re.compile(r"^([\d.]+)s (call|setup|teardown)\s+(\S+)$")
TOTAL = re.compile(r"(\d+) passed(?:, (\d+) skipped)?(?:, (\d+) deselected)?.* in ([\d.]+)s")


def parse(text: str) -> dict[str, Any]:
    """The counts, pytest's own total and the listed durations of a `pytest --durations` output."""
    slowest = [{"seconds": float(m[1]), "phase": m[2], "test": m[3]}
               for m in map(DURATION.match, text.splitlines()) if m]
    totals = TOTAL.findall(text)
    if not totals:
        raise SystemExit("no pytest summary line in the output (did the run finish?)")
    passed, skipped, deselected, seconds = totals[-1]
    failed = re.findall(r"(\d+) failed", text.splitlines()[-1] if text.splitlines() else "")
    return {"pytest_seconds": float(seconds), "passed": int(passed), "skipped": int(skipped or 0),
            "deselected": int(deselected or 0), "failed": int(failed[0]) if failed else 0,
            "listed_seconds": round(sum(d["seconds"] for d in slowest), 2), "slowest": slowest}


def by_file(folder: Path) -> dict[str, Any]:
    """The suite_timeline plugin's records, per test file and per worker: when each file ran (seconds from the
    first test's start), its wall and CPU, and the subprocesses its tests started."""
    tests = [json.loads(line) for f in sorted(folder.glob("*.jsonl")) for line in f.read_text().splitlines()]
    if not tests:
        raise SystemExit(f"no timeline records in {folder}")
    t0 = min(t["start"] for t in tests)
    files: dict[str, dict[str, Any]] = {}
    for t in tests:
        name = t["test"].split("::", 1)[0]
        f = files.setdefault(name, {"worker": t["worker"], "tests": 0, "start": t["start"], "end": t["end"],
                                    "in_tests_s": 0.0, "cpu_own_s": 0.0, "cpu_children_s": 0.0,
                                    "load_1min_max": 0.0, "subprocesses": {}})
        f["tests"] += 1
        f["start"], f["end"] = min(f["start"], t["start"]), max(f["end"], t["end"])
        f["in_tests_s"] += t["end"] - t["start"]
        f["cpu_own_s"] += t["cpu_own_s"]
        f["cpu_children_s"] += t["cpu_children_s"]
        f["load_1min_max"] = max(f["load_1min_max"], t["load_1min"])
        for k, n in t["subprocesses"].items():
            f["subprocesses"][k] = f["subprocesses"].get(k, 0) + n
    for f in files.values():
        f["start"], f["end"] = round(f["start"] - t0, 1), round(f["end"] - t0, 1)
        for k in ("in_tests_s", "cpu_own_s", "cpu_children_s"):
            f[k] = round(f[k], 1)
    workers: dict[str, dict[str, Any]] = {}
    for name, f in sorted(files.items(), key=lambda kv: kv[1]["start"]):
        w = workers.setdefault(f["worker"], {"files": 0, "first_start": f["start"], "last_end": 0.0,
                                             "in_tests_s": 0.0, "cpu_s": 0.0, "order": []})
        w["files"] += 1
        w["last_end"] = max(w["last_end"], f["end"])
        w["in_tests_s"] = round(w["in_tests_s"] + f["in_tests_s"], 1)
        w["cpu_s"] = round(w["cpu_s"] + f["cpu_own_s"] + f["cpu_children_s"], 1)
        w["order"].append(name)
    kinds: dict[str, int] = {}
    for f in files.values():
        for k, n in f["subprocesses"].items():
            kinds[k] = kinds.get(k, 0) + n
    return {"span_s": round(max(t["end"] for t in tests) - t0, 1), "subprocesses": kinds, "workers": workers,
            "files": dict(sorted(files.items(), key=lambda kv: -kv[1]["in_tests_s"]))}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="the entry's name, e.g. before or after")
    parser.add_argument("--out", type=Path, default=Path("bench/results/test_suite_time.json"))
    parser.add_argument("--from-output", type=Path, help="read this pytest output instead of running the suite")
    parser.add_argument("--durations", type=int, default=60)
    parser.add_argument("--save-output", type=Path, help="also write the run's pytest output here")
    parser.add_argument("--timeline", type=Path, help="record per-file timings into this (empty) folder")
    parser.add_argument("--from-timeline", type=Path, help="read per-file timings of an earlier run from here")
    parser.add_argument("--pytest-args", default="-n 2 --dist loadfile",
                        help="as scripts/test.sh runs pytest (default: %(default)s)")
    parser.add_argument("--commit", default="", help="the commit measured (default: git rev-parse HEAD)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    # the commit measured is the one at the start (commits made while the suite runs are not in it)
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                           text=True, check=False).stdout.strip()
    if args.from_timeline and not args.from_output:  # a run stopped before its end: its timeline alone
        entry = {"commit": commit, "partial": True, "timeline": by_file(args.from_timeline)}
        results = json.loads(args.out.read_text()) if args.out.exists() else {}
        results[args.label] = entry
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
        print(f"{args.label}: the timeline of {sum(f['tests'] for f in entry['timeline']['files'].values())} tests")
        return 0
    if args.from_output:
        text, wall = args.from_output.read_text(encoding="utf-8"), None
    else:
        started = time.monotonic()
        env = dict(os.environ)
        timeline = []
        if args.timeline:
            env["SUITE_TIMELINE"] = str(args.timeline.resolve())
            timeline = ["-p", "bench.suite_timeline"]
        done = subprocess.run([sys.executable, "-m", "pytest", *args.pytest_args.split(), *timeline,
                               f"--durations={args.durations}", "-q", "-p", "no:cacheprovider"],
                              capture_output=True, text=True, check=False, env=env)
        wall = round(time.monotonic() - started, 1)
        text = done.stdout + done.stderr
        if args.save_output:
            args.save_output.write_text(text, encoding="utf-8")
    loads = {} if args.from_output else {"load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]}
    entry = {"commit": commit, "wall_seconds": wall, **loads, "cores": os.cpu_count(), **parse(text)}
    if args.timeline or args.from_timeline:
        entry["timeline"] = by_file(args.timeline or args.from_timeline)
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results[args.label] = entry
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"{args.label}: {entry['pytest_seconds']:.0f} s, {entry['passed']} passed, {entry['failed']} failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
