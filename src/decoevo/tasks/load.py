"""Load the questions a run configuration names."""

from __future__ import annotations

from ..benchmarks import get_benchmark, load_jsonl_questions
from ..domain import Question
from ..engine.config import DataConfig


def load_questions(data: DataConfig) -> list[Question]:
    if data.format == "jsonl":
        questions = load_jsonl_questions(data.path, task=data.task or "generic")
    else:
        questions = get_benchmark(data.format).load(data.path)
    if data.task:
        questions = [q.model_copy(update={"task": data.task}) for q in questions]
    if data.limit:
        questions = sorted(questions, key=lambda q: q.id)[: data.limit]
    return questions
