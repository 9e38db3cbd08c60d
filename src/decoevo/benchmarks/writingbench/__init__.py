"""WritingBench (X-PLUG, 2025): writing requests in six domains, five query-specific criteria each,
scored 1-10 by a judge."""

from __future__ import annotations

from ..record import Benchmark, DataFile, DataSource, Split, per_item_calls
from .grader import grade_writingbench
from .loader import load_writingbench
from .official import PROMPTS, grade_writingbench_official

TASK_SPEC = (
    "Task: generative writing in many domains (academic, business, legal, literary, education, "
    "advertising), often with explicit requirements on style, format and length, sometimes with source "
    "material. Good responses satisfy every explicit requirement of the query, fit the genre and "
    "audience, are well organised and fluent, accurate where facts are involved, and show substance "
    "rather than filler. A rubric should turn the query's explicit requirements into checkable criteria "
    "and add the genre's implicit quality standards."
)

SOURCE = DataSource(
    upstream="X-PLUG/WritingBench@ae2d517",
    licence="Apache-2.0",
    homepage="https://github.com/X-PLUG/WritingBench",
    splits=(Split("all", (DataFile(
        "benchmark_all.jsonl",
        "https://raw.githubusercontent.com/X-PLUG/WritingBench/ae2d517/benchmark_query/benchmark_all.jsonl",
        "18fee37c645166eb2e206b36366b2e354265b1e4201db2c86e759e825eaddcbe", 14726077),),
        "benchmark_all.jsonl", "1,000 queries (555 English, 445 Chinese)", records=1000),),
)

BENCHMARK = Benchmark(
    name="writingbench", label="WritingBench", scheme="writingbench", load=load_writingbench,
    grade=grade_writingbench, task_spec=TASK_SPEC, source=SOURCE,
    headline="mean criterion score (1-10) x10",
    official_prompts=PROMPTS, official=grade_writingbench_official, grader_calls=per_item_calls,
    question_range=(10.0, 100.0),  # criteria scored 1-10, x10: the floor is 10
)
