"""Machinery the benchmarks' gold graders share: calling a grader role so that a failure never becomes a
score (`base`), the result types and the unknown-criterion policy (`result`), and range checks (`rules`).

Each benchmark's own grader, prompt and formula live in its folder under `decoevo.benchmarks`;
`decoevo.benchmarks.grade` dispatches on a question's gold scheme.
"""

from __future__ import annotations

from .base import role_name
from .result import BenchmarkScore, GradeResult, ItemGrade, UnknownPolicy

__all__ = ["BenchmarkScore", "GradeResult", "ItemGrade", "UnknownPolicy", "role_name"]
