"""How far a run that is still being written has got, read from its files alone (a report watching it
writes nothing and takes no lock): whether a live process holds it, the inner steps done of those
configured, the phase of its last answered request, and an ETA from its own pace so far."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .events import FinishEvent, InnerStepEvent, InnerStepFailedEvent, ResumeEvent, StartEvent
from .reader import RunReader, RunReadError
from .records import CALLS, LOCK, SUMMARY


@dataclass(frozen=True)
class LiveProgress:
    holder: str  # what .lock names: "pid 123 (decoevo run ...)"
    steps_done: int
    steps_total: int | None  # hyper.steps of config.yaml (a budget-matched run may take more)
    phase: str | None  # the phase of the last answered request ("step 3", "outer 1")
    calls: int  # requests answered so far, paid or from the cache
    elapsed: float | None  # seconds since this process started or resumed the run
    eta: float | None  # seconds left at the pace of the steps this process finished; None before one

    @property
    def step(self) -> int:
        """The step being worked on (1-based), the last one once every step is done."""
        return min(self.steps_done + 1, self.steps_total or self.steps_done + 1)

    def describe(self) -> str:
        total = f"/{self.steps_total}" if self.steps_total is not None else ""
        parts = [f"step {self.step}{total}"]
        if self.phase:
            parts.append(f"now: {self.phase}")
        parts.append(f"{self.calls:,} calls answered")
        if self.elapsed is not None:
            parts.append(f"running {clock_text(self.elapsed)}")
        parts.append(f"ETA ~{clock_text(self.eta)}" if self.eta is not None else "ETA after its first step")
        return ", ".join(parts)


def clock_text(seconds: float) -> str:
    """A duration as M:SS, or H:MM:SS from an hour."""
    s = max(round(seconds), 0)
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


def lock_holder(run_dir: Path) -> str | None:
    """What .lock names when the process it names is alive; None for a run nobody holds (finished, killed,
    or never started). Read only: no lock is taken, so a watcher can never block a resume."""
    path = run_dir / LOCK
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None
    words = text.split()
    if len(words) < 2 or words[0] != "pid" or not words[1].isdigit():
        return None
    try:
        os.kill(int(words[1]), 0)
    except ProcessLookupError:
        return None
    except PermissionError:  # alive, another user's
        pass
    return text


def live_progress(run_dir: Path | str, now: Callable[[], float] = time.time) -> LiveProgress | None:
    """The progress of a run a live process is writing; None when none is (or it has finished)."""
    path = Path(run_dir)
    if (path / SUMMARY).is_file():
        return None
    holder = lock_holder(path)
    if holder is None:
        return None
    reader = RunReader(path)
    try:
        events = reader.events(problems=[])
        config = reader.config_dict() if reader.has("config.yaml") else {}
    except RunReadError:
        events, config = [], {}
    if any(isinstance(e, FinishEvent) for e in events):
        return None
    raw = config.get("hyper")
    hyper: dict[str, Any] = raw if isinstance(raw, dict) else {}
    total = hyper.get("steps") if isinstance(hyper.get("steps"), int) else None
    begun = next((i for i in range(len(events) - 1, -1, -1) if isinstance(events[i], StartEvent | ResumeEvent)), None)
    mine = events[begun:] if begun is not None else []
    first = mine[0] if mine else None
    done_before = first.next_step if isinstance(first, ResumeEvent) else 0
    finished = [e for e in mine if isinstance(e, InnerStepEvent | InnerStepFailedEvent)]
    steps_done = max([done_before, *(e.step + 1 for e in finished)])
    elapsed = now() - first.t if first is not None else None
    eta = None
    if elapsed is not None and finished and total is not None:
        eta = elapsed / len(finished) * max(total - steps_done, 0)
    calls, phase = 0, None
    try:
        for line in reader.jsonl(CALLS, problems=[]):
            calls += 1
            phase = line.get("phase") or phase
    except RunReadError:
        pass
    return LiveProgress(holder, steps_done, total, phase, calls, elapsed, eta)
