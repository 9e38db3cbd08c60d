"""The library side of `decoevo export --to` and `decoevo rubric`: gather a run's bundle, write the files."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..domain import Question
from ..engine.config import DataConfig
from ..errors import ConfigError
from ..evaluation.run_view import RunView
from ..fileio import atomic_write_text
from ..rundir import RunReader
from ..tasks.load import load_questions
from .bundle import Endpoint, gather_bundle
from .formats import IMPORT_FORMATS
from .outdir import OutDir
from .readers import read_imported
from .rubrics import generator_rubrics
from .staging import IMPORT

Tool = Literal["promptfoo", "inspect"]
TOOLS: tuple[str, ...] = ("promptfoo", "inspect")


@dataclass(frozen=True)
class QuestionSource:
    """`--data FILE [--format F]` read: its questions, what an eval tool's file held besides them (its
    `defaultTest`, written back by an export) and the lines saying what was read and what was not."""

    questions: list[Question]
    kept: dict[str, Any] = field(default_factory=dict)
    account: list[str] = field(default_factory=list)


def read_questions(path: str, fmt: str | None, question_var: str | None = None) -> QuestionSource:
    """decoevo's JSONL, a benchmark's file, a promptfoo config or an Inspect dataset."""
    if fmt in IMPORT_FORMATS:
        imported = read_imported(path, fmt, question_var=question_var)
        return QuestionSource(list(imported.questions), dict(imported.kept), imported.account())
    if question_var is not None:
        raise ConfigError("--question-var is for --format promptfoo")
    return QuestionSource(load_questions(DataConfig(path=path, format=fmt or "jsonl")))


def run_import_kept(run_dir: Path) -> dict[str, Any]:
    """What the file a run imported held besides its questions (RUN/import.json), {} for a run of JSONL."""
    reader = RunReader(run_dir)  # a damaged record is named by the reader, not read as "nothing kept"
    record = reader.json(IMPORT) if reader.has(IMPORT) else {}
    kept = record.get("kept") if isinstance(record, dict) else None
    return kept if isinstance(kept, dict) else {}


FILES = {"promptfoo": ("prompts/shipped.json", "prompts/initial.json", "judge_prompt.json", "tests.yaml",
                       "promptfooconfig.yaml"),
         "inspect": ("dataset.jsonl", "decoevo.json", "task.py")}


def _inside(path: Path, folder: Path) -> bool:
    return path.resolve() == folder.resolve() or folder.resolve() in path.resolve().parents


def export_run(run_dir: Path, to: str, out: Path, *, questions: list[Question] | None = None,
               override: Endpoint | None = None, threshold: float | None = None, force: bool = False,
               inputs: tuple[Path, ...] = (), kept: dict[str, Any] | None = None) -> list[Path]:
    """Write `run_dir` as a `to` (promptfoo or inspect) project under `out`; returns the files written.
    `out` is checked before anything is paid (interop/outdir.py): no link followed, no file of the user's
    replaced unless `force`, none of `inputs` (the questions' files) written, nothing written into the run.
    `kept`: what the questions' promptfoo config held besides them (its defaultTest; default: the run's own
    import's, when the questions are the run's)."""
    if to not in TOOLS:
        raise ConfigError(f"--to {to!r}: expected one of {', '.join(TOOLS)}")
    if threshold is not None and not 0 <= threshold <= 1:
        raise ConfigError(f"--threshold {threshold:g}: a test's score is between 0 and 1")
    if threshold is not None and to != "promptfoo":
        raise ConfigError("--threshold is for --to promptfoo (Inspect reports the score itself)")
    if _inside(out, run_dir):
        raise ConfigError(f"{out} is inside the run directory {run_dir}; exports never write into a run: name "
                          "another folder")
    target = OutDir(out, force=force, inputs=inputs)
    target.check(FILES[to])
    bundle = asyncio.run(gather_bundle(run_dir, questions, override=override))
    target.about = {"written_by": f"decoevo export --to {to}", "run": bundle.run,
                    "solver_version": bundle.shipped.version, "generator_version": bundle.generator.version,
                    "endpoint": {"base_url": bundle.solver.base_url, "model": bundle.solver.model,
                                 "api_key_env": bundle.solver.api_key_env},
                    "grader": {"base_url": bundle.judge.base_url, "model": bundle.judge.model,
                               "structured_output": bundle.judge.profile.structured or "json_schema"}}
    if to == "promptfoo":
        from .promptfoo_out import DEFAULT_THRESHOLD, write_promptfoo

        own = kept if kept is not None else run_import_kept(run_dir) if questions is None else {}
        return write_promptfoo(bundle, target, DEFAULT_THRESHOLD if threshold is None else threshold,
                               user_default=own.get("defaultTest") if isinstance(own.get("defaultTest"), dict)
                               else None)
    from .inspect_out import write_inspect

    return write_inspect(bundle, target)


RUBRIC_KEYS = {"id", "question", "generator_version", "rubric"}


def check_rubrics_output(out: Path, *, inputs: tuple[Path, ...] = (), run_dir: Path | None = None,
                         force: bool = False) -> None:
    """`decoevo rubric -o FILE`, before anything is paid: not a link, not an input, not in the run, and not
    a file decoevo did not write (a rubrics file, each line a JSON object with its keys) unless `force`."""
    if out.is_symlink():
        raise ConfigError(f"-o {out}: is a symbolic link; decoevo does not write through a link")
    if any(out.exists() and p.exists() and out.resolve() == p.resolve() for p in inputs):
        raise ConfigError(f"-o {out}: is the questions file (--data); write the rubrics to another file")
    if run_dir is not None and _inside(out, run_dir):
        raise ConfigError(f"-o {out}: is inside the run directory; decoevo never writes into a run it reads")
    if out.exists() and out.is_file() and not force and not _is_rubrics_file(out):
        raise ConfigError(f"-o {out}: exists and is not a rubrics file decoevo wrote; name another file, or pass "
                          "--force to replace it")


def _is_rubrics_file(path: Path) -> bool:
    try:
        with path.open(encoding="utf-8") as f:
            lines = [line for line in f if line.strip()]
        return all(isinstance(row := json.loads(line), dict) and set(row) >= RUBRIC_KEYS for line in lines)
    except (OSError, ValueError):
        return False


def write_rubrics(run_dir: Path, questions: list[Question], out: Path) -> int:
    """`decoevo rubric`: one JSON line per question, its id, text and the co-evolved generator's rubric."""
    found = asyncio.run(generator_rubrics(RunView(run_dir), questions))
    lines = [json.dumps({"id": q.id, "question": q.as_text(), "generator_version": found.generator.version,
                         "rubric": [{"criterion": c.text, "weight": c.weight} for c in found.rubrics[q.id].criteria]},
                        ensure_ascii=False) for q in questions]
    atomic_write_text(out, "\n".join(lines) + "\n")
    return len(lines)
