"""Post-run steps: what a cell does after training, each a library call on the run directory
(`decoevo.api`: evaluate, dynamics, align), the same functions `decoevo eval/dynamics/align` use.

A step is done when its output file exists, so a sweep that is run again does only the steps still
missing. A step that graded nothing fails the cell (and writes no file), so the next sweep retries it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import ConfigError


@dataclass(frozen=True)
class PostStep:
    name: str
    command: str  # the equivalent `decoevo COMMAND RUN_DIR`, for messages
    output: str  # the file it writes, relative to the run directory, a glob (docs/evaluation-files.md)
    legacy: str | None = None  # what an older version wrote instead (still counts as done)

    def done(self, run_dir: Path) -> bool:
        return any(p.is_file() for p in run_dir.glob(self.output)) or (
            self.legacy is not None and (run_dir / self.legacy).is_file())


STEPS: dict[str, PostStep] = {s.name: s for s in [
    # one file per solver version and grader (rundir/evalfiles.py); a cell grades its final skill only
    PostStep("test", "eval", "eval/test-v*.json", legacy="eval/test.json"),
    PostStep("dynamics", "dynamics", "eval/dynamics.json"),
    PostStep("alignment", "align", "eval/alignment.json"),
]}


class StepFailed(Exception):
    """A post-run step graded nothing or did not write its output."""


def check_available(names: list[str]) -> None:
    """Refuse unknown steps when the sweep is planned, so no cell trains and then fails."""
    unknown = [n for n in names if n not in STEPS]
    if unknown:
        raise ConfigError(f"evaluate lists {', '.join(unknown)}; the post-run steps are {', '.join(STEPS)} "
                          "(or none)")


def pending_steps(run_dir: Path, names: list[str]) -> list[str]:
    return [n for n in names if not STEPS[n].done(run_dir)]


def _call(name: str, run_dir: Path) -> Coroutine[Any, Any, dict[str, Any]]:
    from .. import api

    calls: dict[str, Callable[[], Coroutine[Any, Any, dict[str, Any]]]] = {
        "test": lambda: api.evaluate_async(run_dir),
        "dynamics": lambda: api.dynamics_async(run_dir),
        "alignment": lambda: api.align_async(run_dir),
    }
    return calls[name]()


def run_step(name: str, run_dir: Path) -> None:
    """Run one post-run step in this process (its output goes to this process's log)."""
    step = STEPS[name]
    record = asyncio.run(_call(name, run_dir))
    label = f" ({record['grader_independence']})" if record.get("self_graded") else ""
    print(f"{step.name}: " + ", ".join(f"{k} {record[k]}" for k in ("skill_version", "score", "n_graded", "n_ungraded",
                                                                      "f1", "n_questions") if k in record) + label,
          flush=True)
    if not step.done(run_dir):
        raise StepFailed(f"`decoevo {step.command} {run_dir}` wrote no {step.output} (nothing could be graded, "
                         "or an earlier result was kept); see the cell's log")
