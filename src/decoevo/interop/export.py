"""The library side of `decoevo export --to` and `decoevo rubric`: gather a run's bundle, write the files."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Literal

from ..domain import Question
from ..engine.config import DataConfig
from ..errors import ConfigError
from ..evaluation.run_view import RunView
from ..fileio import atomic_write_text
from ..tasks.load import load_questions
from .bundle import Endpoint, gather_bundle
from .imported import IMPORT_FORMATS
from .readers import read_imported
from .rubrics import generator_rubrics

Tool = Literal["promptfoo", "inspect"]
TOOLS: tuple[str, ...] = ("promptfoo", "inspect")


def questions_from(path: str, fmt: str | None, question_var: str | None = None) -> list[Question]:
    """`--data FILE [--format F]`: decoevo's JSONL, a benchmark's file, a promptfoo config or an Inspect dataset."""
    if fmt in IMPORT_FORMATS:
        return list(read_imported(path, fmt, question_var=question_var).questions)
    if question_var is not None:
        raise ConfigError("--question-var is for --format promptfoo")
    return load_questions(DataConfig(path=path, format=fmt or "jsonl"))


def export_run(run_dir: Path, to: str, out: Path, *, questions: list[Question] | None = None,
               override: Endpoint | None = None, threshold: float | None = None) -> list[Path]:
    """Write `run_dir` as a `to` (promptfoo or inspect) project under `out`; returns the files written."""
    if to not in TOOLS:
        raise ConfigError(f"--to {to!r}: expected one of {', '.join(TOOLS)}")
    if threshold is not None and not 0 <= threshold <= 1:
        raise ConfigError(f"--threshold {threshold:g}: a test's score is between 0 and 1")
    if threshold is not None and to != "promptfoo":
        raise ConfigError("--threshold is for --to promptfoo (Inspect reports the score itself)")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file; name a directory to write the {to} files into")
    bundle = asyncio.run(gather_bundle(run_dir, questions, override=override))
    if to == "promptfoo":
        from .promptfoo_out import DEFAULT_THRESHOLD, write_promptfoo

        return write_promptfoo(bundle, out, DEFAULT_THRESHOLD if threshold is None else threshold)
    from .inspect_out import write_inspect

    return write_inspect(bundle, out)


def write_rubrics(run_dir: Path, questions: list[Question], out: Path) -> int:
    """`decoevo rubric`: one JSON line per question, its id, text and the co-evolved generator's rubric."""
    found = asyncio.run(generator_rubrics(RunView(run_dir), questions))
    lines = [json.dumps({"id": q.id, "question": q.as_text(), "generator_version": found.generator.version,
                         "rubric": [{"criterion": c.text, "weight": c.weight} for c in found.rubrics[q.id].criteria]},
                        ensure_ascii=False) for q in questions]
    atomic_write_text(out, "\n".join(lines) + "\n")
    return len(lines)
