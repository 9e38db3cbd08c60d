"""Users' own questions (`--format jsonl`), optionally with weighted gold criteria (scheme `weighted`)."""

from __future__ import annotations

from ..record import Benchmark, per_item_calls
from .grader import grade_weighted
from .loader import load_jsonl_questions

TASK_SPEC = (
    "Task: answer the user's request well. Good answers are correct, complete on what matters, safe, "
    "clear, and fitted to the request's explicit constraints and its audience. A rubric should turn the "
    "request's explicit and implicit requirements into specific, checkable criteria with weights that "
    "reflect importance."
)

BENCHMARK = Benchmark(
    name="jsonl", label="Custom (weighted gold)", scheme="weighted", load=load_jsonl_questions,
    grade=grade_weighted, task_spec=TASK_SPEC, tasks=("generic",),
    headline="points of met criteria over the positive points, clipped per question", grader_calls=per_item_calls,
)
