"""Load the questions a run configuration names."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..benchmarks import get_benchmark, load_jsonl_questions
from ..domain import Question


class DataConfig(BaseModel):
    """The questions a run loads. Required in a run configuration; `decoevo run` fills it from `--data` or
    `--benchmark`, or with the bundled HealthBench sample when neither a flag nor the file gives it."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False, defer_build=True)

    path: str = Field(description="the questions file: JSONL in the question format, or a benchmark's own file")
    format: str = Field("jsonl", description="a benchmark's format name (`decoevo data list`) or jsonl")
    task: str | None = Field(None, description="task family for the structural spec; default from the data")
    task_spec: str | None = Field(None, description="a file with your own structural-audit specification")
    limit: int | None = Field(None, ge=1, description="use only N questions: the first N by id, or with "
                              "`sample_seed` a seeded sample stratified by category")
    sample_seed: int | None = Field(None, ge=0, lt=2**63, description="with `limit`: draw the N questions by "
                                    "this seed, each category its share, whole conversations (`decoevo reproduce` "
                                    "sets 0)")

    @field_validator("format")
    @classmethod
    def _known_format(cls, value: str) -> str:
        from ..benchmarks import BENCHMARKS  # the registry imports the model client; keep config light

        if value not in BENCHMARKS:
            raise ValueError(f"unknown format {value!r}; expected one of: {', '.join(map(repr, BENCHMARKS))}")
        return value


def load_questions(data: DataConfig) -> list[Question]:
    if data.format == "jsonl":
        questions = load_jsonl_questions(data.path, task=data.task or "generic")
    else:
        questions = get_benchmark(data.format).load(data.path)
    if data.task:
        questions = [q.model_copy(update={"task": data.task}) for q in questions]
    if data.limit and data.sample_seed is not None:
        from .sample import stratified_sample

        questions = stratified_sample(questions, data.limit, data.sample_seed)
    elif data.limit:
        questions = sorted(questions, key=lambda q: q.id)[: data.limit]
    return questions
