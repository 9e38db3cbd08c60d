"""A pytest plugin that records when each test ran, on which xdist worker, its CPU, and the subprocesses it
started (issue 47.4: where the suite's time goes, file by file). Off unless `SUITE_TIMELINE` names a folder:

    SUITE_TIMELINE=/tmp/tl .venv/bin/python -m pytest -n 2 --dist loadfile -p bench.suite_timeline
    .venv/bin/python -m bench.suite_time --label now --timeline /tmp/tl   # or bench.suite_time's --run-timeline

Each process (the xdist controller and each worker) appends one JSON line per test to `<folder>/<worker>.jsonl`:
its node id, wall start and end (epoch seconds), the worker's CPU over the test (its own, and its waited-for
children's: the `decoevo` subprocesses and servers a test starts and reaps), the 1-minute load average at its end,
and the subprocesses it started, by kind (`decoevo` = a `python -m decoevo` or `decoevo` command line). Subprocesses
are seen through the interpreter's `subprocess.Popen` audit event, so asyncio's subprocesses count too; processes
those children start (a sweep's cells) are not seen."""

from __future__ import annotations

import json
import os
import resource
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

_started: Counter[str] = Counter()


def kind(executable: Any, args: Any) -> str:
    """What a started subprocess is, from its command line."""
    argv = [os.fsdecode(a) for a in args] if isinstance(args, (list, tuple)) else [os.fsdecode(args)]
    program = Path(os.fsdecode(executable) if executable else argv[0]).name if argv else ""
    text = " ".join(argv)
    if program == "decoevo" or ("-m decoevo" in text and "decoevo.testing" not in text) \
            or "run_module(\"decoevo\"" in text or "run_module('decoevo'" in text:
        return "decoevo"
    if program.startswith("python"):
        return "python -m " + argv[2] if len(argv) > 2 and argv[1] == "-m" else "python"
    if "promptfoo" in text:
        return "promptfoo"
    if "llama" in program:
        return "llama-server"
    return program or "?"


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if event == "subprocess.Popen":
        try:
            _started[kind(args[0], args[1])] += 1
        except Exception:  # a bookkeeping hook must never break the test it watches
            _started["?"] += 1


def _cpu() -> tuple[float, float]:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, kids.ru_utime + kids.ru_stime


def pytest_configure(config: pytest.Config) -> None:
    folder = os.environ.get("SUITE_TIMELINE")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        config.stash[_OUT] = Path(folder) / f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')}.jsonl"
        sys.addaudithook(_audit)


_OUT = pytest.StashKey[Path]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    out = item.config.stash.get(_OUT, None)
    if out is None:
        yield
        return
    _started.clear()
    start, (own0, kids0) = time.time(), _cpu()
    yield
    end, (own1, kids1) = time.time(), _cpu()
    line = {"test": item.nodeid, "worker": out.stem, "start": round(start, 3), "end": round(end, 3),
            "cpu_own_s": round(own1 - own0, 3), "cpu_children_s": round(kids1 - kids0, 3),
            "load_1min": round(os.getloadavg()[0], 2), "subprocesses": dict(_started)}
    with out.open("a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")
