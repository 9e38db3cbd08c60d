"""One folder per benchmark (loader, gold grader, scoring rule, structural-audit spec, label, data
source), the registry of them, grading by gold scheme, and the local data cache (`decoevo data`)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .custom.loader import load_jsonl_questions
from .graders import GRADER_ROLES, GRADERS, aggregate, grade
from .record import Benchmark, DataFile, DataSource, Sampling, Split
from .registry import BENCHMARKS, BY_SCHEME, find, get_benchmark, load_benchmark, structural_spec

if TYPE_CHECKING:
    from .eqbench_cw.loader import load_eqbench_cw
    from .healthbench.loader import load_healthbench
    from .llmeval_med.loader import load_llmeval_med, parse_checklist
    from .researchqa.loader import load_researchqa, load_researchqa_hub
    from .scholarqa_cs.loader import load_scholarqa_cs
    from .writingbench.loader import load_writingbench

# A benchmark's own loaders, importing its folder when first asked for (registry.py's docstring says why).
_LOADERS = {
    "load_eqbench_cw": ".eqbench_cw.loader",
    "load_healthbench": ".healthbench.loader",
    "load_llmeval_med": ".llmeval_med.loader",
    "parse_checklist": ".llmeval_med.loader",
    "load_researchqa": ".researchqa.loader",
    "load_researchqa_hub": ".researchqa.loader",
    "load_scholarqa_cs": ".scholarqa_cs.loader",
    "load_writingbench": ".writingbench.loader",
}


def __getattr__(name: str) -> Any:
    if name in _LOADERS:
        return getattr(importlib.import_module(_LOADERS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
