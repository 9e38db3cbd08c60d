"""Saving an evaluation result without losing a better one.

A grader that was down, or a flaky network, can produce a result with fewer graded questions than the
one already on disk. That result is not allowed to replace the earlier one unless the user asks
(`--force`): coverage is what makes a score comparable, and a silent downgrade loses paid work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from ..rundir import RunReader, RunReadError, RunWriter
from ..rundir.reader import validate_record
from ..rundir.records import AlignmentFile, CompareFile, DynamicsFile, EvalFile


def coverage(record: BaseModel) -> int:
    """How many questions (or checkpoints' questions) the result actually graded."""
    if isinstance(record, EvalFile):
        return record.n_graded
    if isinstance(record, AlignmentFile):
        return record.n_questions
    if isinstance(record, CompareFile):
        return record.n_paired
    if isinstance(record, DynamicsFile):
        return sum(p.n_gold_graded or 0 for p in record.points) + sum(p.proxy is not None for p in record.points)
    raise TypeError(f"not an evaluation record: {type(record).__name__}")


@dataclass(frozen=True)
class SaveDecision:
    write: bool
    reason: str


def decide_save(new_coverage: int, old_coverage: int | None, *, force: bool) -> SaveDecision:
    """Write unless nothing was graded, or an earlier result graded more (then only with force)."""
    if new_coverage == 0:
        return SaveDecision(False, "nothing could be graded; no result written" +
                            ("" if old_coverage is None else f" (the earlier result, {old_coverage} graded, is kept)"))
    if old_coverage is None:
        return SaveDecision(True, "no earlier result")
    if force:
        return SaveDecision(True, "replaced by request (--force)")
    if new_coverage < old_coverage:
        return SaveDecision(False, f"kept the earlier result ({old_coverage} graded) over this one "
                                   f"({new_coverage} graded); pass --force to replace it")
    return SaveDecision(True, f"replaces the earlier result ({old_coverage} graded)")


FAILED_DIR = "failed"  # RUN/eval/failed/<name>.json: results that were not kept, for inspection


def save_result(writer: RunWriter, rel: str, record: dict[str, Any], model: type[BaseModel], *,
                force: bool = False) -> SaveDecision:
    """Validate `record` as `model` and write it atomically to writer.path/rel, unless decide_save says no."""
    new = validate_record(model, record, writer.path / rel)
    old_coverage = None
    reader = RunReader(writer.path)
    if reader.has(rel):
        try:
            old_coverage = coverage(reader.model(model, rel))
        except RunReadError:
            old_coverage = None  # an unreadable earlier file is no result to protect
    decision = decide_save(coverage(new), old_coverage, force=force)
    # A result that is not kept is still worth reading (which items failed, and how): it goes to failed/.
    writer.write_json(rel if decision.write else f"{FAILED_DIR}/{rel}", record)
    return decision
