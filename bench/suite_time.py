"""How long the default test suite takes: runs `python -m pytest --durations=N` (the default `-m 'not slow'`)
or reads the output of such a run, and writes the wall time, the counts and the slowest tests to a JSON file.

    .venv/bin/python -m bench.suite_time --label after --out bench/results/test_suite_time.json
    .venv/bin/python -m bench.suite_time --label before --from-output before.txt

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", required=True, help="the entry's name, e.g. before or after")
    parser.add_argument("--out", type=Path, default=Path("bench/results/test_suite_time.json"))
    parser.add_argument("--from-output", type=Path, help="read this pytest output instead of running the suite")
    parser.add_argument("--durations", type=int, default=60)
    parser.add_argument("--save-output", type=Path, help="also write the run's pytest output here")
    parser.add_argument("--commit", default="", help="the commit measured (default: git rev-parse HEAD)")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()[0]
    # the commit measured is the one at the start (commits made while the suite runs are not in it)
    commit = args.commit or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                           text=True, check=False).stdout.strip()
    if args.from_output:
        text, wall = args.from_output.read_text(encoding="utf-8"), None
    else:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-m", "pytest", f"--durations={args.durations}", "-q",
                               "-p", "no:cacheprovider"], capture_output=True, text=True, check=False)
        wall = round(time.monotonic() - started, 1)
        text = done.stdout + done.stderr
        if args.save_output:
            args.save_output.write_text(text, encoding="utf-8")
    loads = {} if args.from_output else {"load_1min_before": load_before, "load_1min_after": os.getloadavg()[0]}
    entry = {"commit": commit, "wall_seconds": wall, **loads, "cores": os.cpu_count(), **parse(text)}
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    results[args.label] = entry
    args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    print(f"{args.label}: {entry['pytest_seconds']:.0f} s, {entry['passed']} passed, {entry['failed']} failed")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
