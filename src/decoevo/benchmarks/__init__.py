"""One folder per benchmark (loader, gold grader, scoring rule, structural-audit spec, label, data
source), the registry of them, grading by gold scheme, and the local data cache (`decoevo data`)."""

from __future__ import annotations

from .custom.loader import load_jsonl_questions
from .eqbench_cw.loader import load_eqbench_cw
from .graders import GRADER_ROLES, GRADERS, aggregate, grade
from .healthbench.loader import load_healthbench
from .llmeval_med.loader import load_llmeval_med, parse_checklist
from .record import Benchmark, DataFile, DataSource, Sampling, Split
from .registry import BENCHMARKS, BY_SCHEME, find, get_benchmark, load_benchmark, structural_spec
from .researchqa.loader import load_researchqa, load_researchqa_hub
from .scholarqa_cs.loader import load_scholarqa_cs
from .writingbench.loader import load_writingbench

__all__ = [
    "BENCHMARKS",
    "BY_SCHEME",
    "GRADERS",
    "GRADER_ROLES",
    "Benchmark",
    "DataFile",
    "DataSource",
    "Sampling",
    "Split",
    "aggregate",
    "find",
    "get_benchmark",
    "grade",
    "load_benchmark",
    "load_eqbench_cw",
    "load_healthbench",
    "load_jsonl_questions",
    "load_llmeval_med",
    "load_researchqa",
    "load_researchqa_hub",
    "load_scholarqa_cs",
    "load_writingbench",
    "parse_checklist",
    "structural_spec",
]
