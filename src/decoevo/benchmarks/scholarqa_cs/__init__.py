"""ScholarQA-CS (ScholarQABench, 2024): computer-science research questions with expert-written
weighted criteria; a research-QA benchmark available as one public file."""

from __future__ import annotations

from ..record import Benchmark, DataFile, DataSource, Split, per_item_calls
from ..researchqa import TASK_SPEC
from .grader import grade_scholarqa_cs
from .loader import load_scholarqa_cs

SOURCE = DataSource(
    upstream="AkariAsai/ScholarQABench@95e6fc5",
    licence="MIT",
    homepage="https://github.com/AkariAsai/ScholarQABench",
    splits=(Split("all", (DataFile(
        "test_configs_snippets.json",
        "https://raw.githubusercontent.com/AkariAsai/ScholarQABench/95e6fc5/data/scholarqa_cs/test_configs_snippets.json",
        "61cd2d82c0a4bf2a4a474a033c61311f927ecb7a0bfe31fcf4570f3333dce830", 1053423),),
        "test_configs_snippets.json", "110 cases for 100 questions", records=110),),
)

BENCHMARK = Benchmark(
    name="scholarqa_cs", label="ScholarQA-CS", scheme="scholarqa_cs", load=load_scholarqa_cs,
    grade=grade_scholarqa_cs, task_spec=TASK_SPEC, source=SOURCE,
    headline="weighted criterion score (0-10) x10", grader_calls=per_item_calls,
)
