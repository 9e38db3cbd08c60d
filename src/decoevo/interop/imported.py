"""What an imported eval-tool file gives decoevo: questions, an initial solver skill, task requirements, the
model the file names, and an account of what was read and what was not."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain import Question
from ..errors import ConfigError

NAMED_AT_MOST = 8  # tests named in the account; the rest are counted


@dataclass(frozen=True)
class Use:
    """One kind of thing a file holds (an assertion type, a sample field) and what decoevo made of it.
    `became` None: not used, and `why` says why."""

    kind: str
    count: int
    became: str | None = None
    why: str | None = None


@dataclass(frozen=True)
class ImportSummary:
    """What a reader took from a file and what it left, as data: `run` prints its lines, `--strict` refuses
    what is left, and any other command may show it again."""

    unit: str  # "tests" or "samples"
    read: int
    uses: tuple[Use, ...] = ()
    unchecked: tuple[str, ...] = ()  # items (tests) whose own checks decoevo uses none of
    unchecked_why: str = ""
    notes: tuple[str, ...] = ()  # one line each: the model the file names, ...

    @property
    def unused(self) -> tuple[Use, ...]:
        return tuple(u for u in self.uses if u.became is None)

    def lines(self) -> list[str]:
        """The account, a line per group: read and used, not used (and why), the items left without checks."""
        used = [u for u in self.uses if u.became is not None]
        head = f"read {self.read} {self.unit}"
        if used:
            head += ": " + ", ".join(f"{u.count} {u.kind} -> {u.became}" for u in used)
        out = [head]
        by_why: dict[str, list[Use]] = {}
        for u in self.unused:
            by_why.setdefault(u.why or "not used", []).append(u)
        for why, group in by_why.items():
            out.append("not used: " + ", ".join(f"{u.count} {u.kind}" for u in group) + f" ({why})")
        if self.unchecked:
            shown = ", ".join(self.unchecked[:NAMED_AT_MOST])
            more = len(self.unchecked) - NAMED_AT_MOST
            out.append(f"{len(self.unchecked)} {self.unit} {self.unchecked_why}: {shown}"
                       + (f" and {more} more" if more > 0 else ""))
        out.extend(self.notes)
        return out

    def refuse_unused(self, source: str) -> None:
        """`--strict`: a ConfigError (one line) when anything in the file is not used."""
        if self.unused:
            left = ", ".join(f"{u.count} {u.kind}" for u in self.unused)
            raise ConfigError(f"--strict: {Path(source).name} holds what decoevo does not use ({left}); "
                              "drop --strict to run without them, or take them out of the file")


@dataclass(frozen=True)
class ImportedModel:
    """The model a promptfoo config's `providers:` names, as decoevo's OpenAI-compatible backend would
    call it. `api_key_env`: the variable promptfoo reads the key from (a key's text is never kept)."""

    provider: str  # the provider id as the file wrote it
    model: str
    base_url: str
    api_key_env: str | None = None
    temperature: float | None = None
    max_tokens: int | None = None


@dataclass(frozen=True)
class Imported:
    """An eval tool's file read as decoevo's inputs. `skill`: the file's prompt as the initial solver skill
    (None: the tool's file has none, as an Inspect dataset). `requirements`: what the file's own graders
    ask of an answer, the task specification the structural auditor checks rubrics against. `model`: the
    model the file names (None: none decoevo can call; `summary.notes` says why). `kept`: the file's
    config-level parts decoevo does not use but an export writes back unchanged (promptfoo: `providers`,
    `defaultTest`), as plain JSON data; each question's own are in its `meta[format]`."""

    source: str
    format: str
    questions: tuple[Question, ...]
    skill: str | None = None
    requirements: tuple[str, ...] = ()
    summary: ImportSummary | None = None
    model: ImportedModel | None = None
    kept: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def task_spec(self) -> str | None:
        """The structural-audit specification: the requirements the file's graders state (None: none)."""
        if not self.requirements:
            return None
        lines = "\n".join(f"- {r}" for r in self.requirements)
        return (f"Task: answer the user's request the way the tests in {Path(self.source).name} expect. "
                "A rubric should turn the request into specific, checkable criteria with weights that reflect "
                f"importance, and cover what these tests require of every good answer:\n{lines}")

    def account(self) -> list[str]:
        """The lines saying what was read and what was not (none for a file read whole)."""
        return self.summary.lines() if self.summary is not None else []

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
            rows.append(json.dumps(row, ensure_ascii=False, allow_nan=False))
        return "\n".join(rows) + "\n"
