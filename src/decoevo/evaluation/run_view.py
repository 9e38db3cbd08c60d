"""A finished (or stopped) run directory read back for evaluation: its configuration, splits, skill
lineage and the timeline of which skill versions were in force after each step.

Only post-hoc analyses use this: it loads questions with their gold rubrics, which no optimization
role may see.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..domain import Question, Skill
from ..engine.config import RunConfig, load_config
from ..lm.errors import ConfigError
from ..store import RunDir
from ..tasks.load import load_questions

_HEADER = re.compile(r"<!-- kind: (\w+); version: v(\d+); parent: (none|v\d+) -->\n<!-- reason: (.*?) -->\n\n",
                     re.DOTALL)


def parse_skill_markdown(text: str) -> Skill:
    """The inverse of `store.run_dir.skill_markdown`."""
    m = _HEADER.match(text)
    if m is None:
        raise ValueError("not a decoevo skill file (the two header comments are missing)")
    kind, version, parent, reason = m.groups()
    return Skill(kind=kind, version=int(version), text=text[m.end():].rstrip("\n"),
                 parent=None if parent == "none" else int(parent[1:]), reason=reason)


@dataclass(frozen=True)
class Checkpoint:
    """The skill versions in force after `step` completed inner steps (step 0 = the initial skills)."""

    step: int
    solver_version: int
    generator_version: int


def timeline(events: list[dict[str, Any]]) -> list[Checkpoint]:
    """Replay the event log: one checkpoint per completed inner step, plus the start.

    An outer round changes the generator between steps, so a step's checkpoint carries the generator
    version in force when the step ended (the one its successor will be judged under)."""
    solver = generator = 0
    points = [Checkpoint(0, 0, 0)]
    for e in events:
        kind = e.get("event")
        if kind == "start":
            solver = generator = 0
            points = [Checkpoint(0, 0, 0)]
        elif kind == "outer_round":
            generator = int(e.get("generator_version", generator))
            points[-1] = Checkpoint(points[-1].step, solver, generator)
        elif kind == "inner_step":
            solver = int(e.get("solver_version", solver))
            points.append(Checkpoint(int(e["step"]) + 1, solver, generator))
        elif kind == "budget_stop" and "solver_version" in e:  # the partial step was dropped (engine/run.py)
            points = [p for p in points if p.step <= int(e["at_step"])]
            solver = points[-1].solver_version
    return points


class RunView:
    """Read-only access to what a run left on disk."""

    def __init__(self, path: Path | str) -> None:
        self.dir = RunDir(path)
        if not self.dir.exists():
            raise ConfigError(f"{self.dir.path}: not a decoevo run directory (no config.yaml); "
                              "pass a directory made by `decoevo run`")
        self.path = self.dir.path
        self.config: RunConfig = load_config(self.path / "config.yaml")
        splits = self.path / "splits.json"
        if not splits.is_file():
            raise ConfigError(f"{splits}: missing; the run never started its first step")
        self.split_ids: dict[str, list[str]] = self.dir.read_json("splits.json")
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
        return (self.path / "summary.json").is_file()

    # ---- skills --------------------------------------------------------------------------------
    def skill(self, kind: str, version: int) -> Skill:
        path = self.path / "skills" / kind / f"v{version:03d}.md"
        if not path.is_file():
            raise ConfigError(f"{path}: no such skill version in this run")
        try:
            return parse_skill_markdown(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ConfigError(f"{path}: {exc}") from None

    def versions(self, kind: str) -> list[int]:
        return sorted(int(p.stem[1:]) for p in (self.path / "skills" / kind).glob("v*.md"))

    def final(self, kind: str) -> Skill:
        """The last accepted version; the checkpoint's exact text when there is one (no whitespace drift)."""
        checkpoint = self.dir.load_checkpoint() if (self.path / "checkpoint.json").is_file() else None
        if checkpoint is not None:
            return Skill.model_validate(checkpoint["state"][kind])
        if self.finished:  # stopped before its first checkpoint: the summary names what it kept
            return self.skill(kind, int(json.loads((self.path / "summary.json").read_text())[f"{kind}_version"]))
        versions = self.versions(kind)
        if not versions:
            raise ConfigError(f"{self.path}: no {kind} skill saved")
        return self.skill(kind, versions[-1])

    def timeline(self) -> list[Checkpoint]:
        return timeline(self.dir.events())

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
            raise ConfigError(f"{self.path}: the {name} split of this run is empty; set splits.{name} when "
                              "starting a run to evaluate on it, or choose another split")
        by_id = self.questions()
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise ConfigError(f"{self.path}: {len(missing)} {name} question(s) are no longer in "
                              f"{self.config.data.path} (first: {missing[0]}); the data changed since the run")
        return [by_id[i] for i in ids]
