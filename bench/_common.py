"""Shared by the benchmarks: machine facts and a check that nothing else was using the CPU."""

from __future__ import annotations

import json
import os
import platform
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu": cpu, "python": platform.python_version(),
            "platform": platform.platform()}


def write_result(out: Path, doc: dict[str, Any]) -> None:
    """Write a bench's result as indented JSON (its folder made if missing) and say where."""
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out}")


def busy_cpu_s() -> float | None:
    """CPU seconds the whole machine has been busy since boot (Linux), or None."""
    try:
        fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    except OSError:
        return None
    ticks = [int(f) for f in fields]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return (sum(ticks[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """User + system CPU seconds of another process (Linux), 0.0 when unknown."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_quiet(max_busy: float = 0.1, timeout_s: float = 0.0, window_s: float = 2.0) -> float | None:
    """Wait (up to timeout_s) until the machine is less than `max_busy` busy over `window_s`;
    returns the last measured busy fraction (None where /proc/stat is unavailable)."""
    start = time.monotonic()
    told = False
    while True:
        before, t0 = busy_cpu_s(), time.monotonic()
        time.sleep(window_s)
        after = busy_cpu_s()
        if before is None or after is None:
            return None
        busy = (after - before) / ((time.monotonic() - t0) * (os.cpu_count() or 1))
        if busy < max_busy or time.monotonic() - start >= timeout_s:
            if told:
                print(f"  waited {time.monotonic() - start:.0f}s for other work to stop (now {busy:.0%} busy)")
            return round(busy, 3)
        if not told:
            print(f"  machine {busy:.0%} busy with other work; waiting up to {timeout_s:.0f}s", flush=True)
            told = True


class ForeignLoad:
    """Measures CPU used on this machine by processes other than ours during a block:
    machine busy seconds minus this process's and the listed child processes' CPU seconds."""

    def __init__(self, child_pids: list[int] | None = None) -> None:
        self.child_pids = child_pids or []
        self.foreign_s: float | None = None

    def _own(self) -> float:
        return time.process_time() + sum(process_cpu_s(pid) for pid in self.child_pids)

    def __enter__(self) -> ForeignLoad:
        self._busy0, self._own0 = busy_cpu_s(), self._own()
        return self

    def __exit__(self, *_: object) -> None:
        busy1 = busy_cpu_s()
        if self._busy0 is not None and busy1 is not None:
            self.foreign_s = round(max(0.0, (busy1 - self._busy0) - (self._own() - self._own0)), 2)
