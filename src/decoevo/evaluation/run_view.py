"""A finished (or stopped, or live) run directory read back for evaluation: its configuration, splits,
skill lineage and the timeline of which skill versions were in force after each step.

Only post-hoc analyses use this: it loads questions with their gold rubrics, which no optimization
role may see. It reads through `rundir.RunReader` and never writes to the run.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..domain import Question, Skill
from ..engine.config import RunConfig, config_from_dict
from ..lm.errors import ConfigError
from ..rundir import (
    BudgetStopEvent,
    InnerStepEvent,
    OuterRoundEvent,
    RunEvent,
    RunReader,
    StartEvent,
    parse_skill_markdown,
)
from ..tasks.load import load_questions

__all__ = ["Checkpoint", "RunView", "parse_skill_markdown", "timeline"]


@dataclass(frozen=True)
class Checkpoint:
    """The skill versions in force after `step` completed inner steps (step 0 = the initial skills)."""

    step: int
    solver_version: int
    generator_version: int


def timeline(events: list[RunEvent]) -> list[Checkpoint]:
    """Replay the event log: one checkpoint per completed inner step, plus the start.

    An outer round changes the generator between steps, so a step's checkpoint carries the generator
    version in force when the step ended (the one its successor will be judged under)."""
    solver = generator = 0
    points = [Checkpoint(0, 0, 0)]
    for e in events:
        if isinstance(e, StartEvent):
            solver = generator = 0
            points = [Checkpoint(0, 0, 0)]
        elif isinstance(e, OuterRoundEvent):
            generator = e.generator_version
            points[-1] = Checkpoint(points[-1].step, solver, generator)
        elif isinstance(e, InnerStepEvent):
            solver = e.solver_version
            points.append(Checkpoint(e.step + 1, solver, generator))
        elif isinstance(e, BudgetStopEvent) and e.solver_version is not None:  # the partial step was dropped
            points = [p for p in points if p.step <= e.at_step]
            solver = points[-1].solver_version
    return points


class RunView:
    """Read-only access to what a run left on disk."""

    def __init__(self, path: Path | str) -> None:
        self.reader = RunReader(path)
        self.path = self.reader.path
        if not self.reader.exists():
            raise ConfigError(f"{self.path}: not a decoevo run directory (no config.yaml); "
                              "pass a directory made by `decoevo run`")
        self.config: RunConfig = config_from_dict(self.reader.config_dict(), source=str(self.path / "config.yaml"))
        if not self.reader.has("splits.json"):
            raise ConfigError(f"{self.path / 'splits.json'}: missing; the run never started its first step")
        self.split_ids: dict[str, list[str]] = self.reader.split_ids()
        self._questions: dict[str, Question] | None = None

    # ---- identity --------------------------------------------------------------------------------
    @property
    def method(self) -> str:
        return self.config.method

    @property
    def seed(self) -> int:
        return self.config.seed

    @property
    def finished(self) -> bool:
        return self.reader.has("summary.json")

    @property
    def run_id(self) -> str | None:
        """The id the run was started with (its first start event's; a resume keeps it), which every result
        written into it carries; None for a run from before ids were recorded."""
        return next((e.run_id for e in self.reader.events(problems=[]) if isinstance(e, StartEvent)), None)

    # ---- skills --------------------------------------------------------------------------------
    def skill(self, kind: str, version: int) -> Skill:
        return self.reader.skill(kind, version)

    def versions(self, kind: str) -> list[int]:
        return self.reader.versions(kind)

    def final(self, kind: str) -> Skill:
        """The last accepted version; the checkpoint's exact text when there is one (no whitespace drift)."""
        return self.reader.final_skill(kind)

    def timeline(self) -> list[Checkpoint]:
        return timeline(self.reader.events(problems=[]))

    # ---- questions -----------------------------------------------------------------------------
    def questions(self) -> dict[str, Question]:
        if self._questions is None:
            data = self.config.data
            if not Path(data.path).is_file():
                raise ConfigError(f"{self.path / 'config.yaml'}: data.path {data.path} not found; run the evaluation "
                                  "from the directory the run was started in, or fix the path in config.yaml")
            self._questions = {q.id: q for q in load_questions(data)}
        return self._questions

    def split(self, name: str) -> list[Question]:
        if name not in self.split_ids:
            raise ConfigError(f"unknown split '{name}' (this run has: {', '.join(self.split_ids)})")
        ids = self.split_ids[name]
        if not ids:
            others = ", ".join(f"{k} ({len(v)})" for k, v in self.split_ids.items() if v and k != name)
            raise ConfigError(f"{self.path}: the {name} split of this run is empty; set splits.{name} when "
                              f"starting a run to evaluate on it, or choose a split it has with --split"
                              f"{f' (questions: {others})' if others else ''}")
        by_id = self.questions()
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise ConfigError(f"{self.path}: {len(missing)} {name} question(s) are no longer in "
                              f"{self.config.data.path} (first: {missing[0]}); the data changed since the run")
        return [by_id[i] for i in ids]
