"""What an imported eval-tool file gives decoevo: questions, an initial solver skill, task requirements."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..domain import Question

IMPORT_FORMATS = ("promptfoo", "inspect")


@dataclass(frozen=True)
class Imported:
    """An eval tool's file read as decoevo's inputs. `skill`: the file's prompt as the initial solver skill
    (None: the tool's file has none, as an Inspect dataset). `requirements`: what the file's own graders
    ask of an answer, the task specification the structural auditor checks rubrics against."""

    source: str
    format: str
    questions: tuple[Question, ...]
    skill: str | None = None
    requirements: tuple[str, ...] = ()

    def task_spec(self) -> str | None:
        """The structural-audit specification: the requirements the file's graders state (None: none)."""
        if not self.requirements:
            return None
        lines = "\n".join(f"- {r}" for r in self.requirements)
        return (f"Task: answer the user's request the way the tests in {Path(self.source).name} expect. "
                "A rubric should turn the request into specific, checkable criteria with weights that reflect "
                f"importance, and cover what these tests require of every good answer:\n{lines}")

    def jsonl(self) -> str:
        """The questions in decoevo's own question format (one JSON object a line)."""
        rows = []
        for q in self.questions:
            row: dict[str, object] = {"id": q.id, "prompt": [t.model_dump() for t in q.turns], "task": q.task}
            if q.gold is not None:
                row["gold"] = {"scheme": q.gold.scheme,
                               "items": [{"text": i.text, "points": i.points} for i in q.gold.items]}
            if q.meta:
                row["meta"] = q.meta
            rows.append(json.dumps(row, ensure_ascii=False))
        return "\n".join(rows) + "\n"
