"""Benchmark loaders: each reads a public benchmark's own file format into `Question`s whose gold rubric
names the official grading rule (`GoldRubric.scheme`), and a registry from format name to loader.

Every malformed record raises a `DatasetError` naming the file, the line (JSONL) or the record's
JSONPath-like reference (JSON files), and the field.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from ...domain import Question
from ..loaders import load_healthbench, load_jsonl_questions
from .eqbench import load_eqbench_cw
from .llmeval_med import load_llmeval_med, parse_checklist
from .researchqa import load_researchqa, load_researchqa_hub
from .scholarqa import load_scholarqa_cs
from .writingbench import load_writingbench

Loader = Callable[[Path | str], list[Question]]

BENCHMARKS: dict[str, Loader] = {
    "healthbench": load_healthbench,
    "writingbench": load_writingbench,
    "scholarqa_cs": load_scholarqa_cs,
    "researchqa": load_researchqa,
    "llmeval_med": load_llmeval_med,
    "eqbench_cw": load_eqbench_cw,
    "jsonl": load_jsonl_questions,
}

# Where each benchmark sits inside the shared data folder (a file, or a folder for EQ-Bench).
_SHARED: dict[str, tuple[str, ...]] = {
    "healthbench": ("healthbench/healthbench_eval_500.jsonl",),
    "writingbench": ("writingbench/benchmark_all.jsonl",),
    "scholarqa_cs": ("scholarqa_cs/test_configs_snippets.json",),
    "researchqa": ("researchqa/test.json", "researchqa/test.jsonl"),
    "llmeval_med": ("llmeval_med/dataset.json", "llmeval_med_sample/dataset_sample.json"),
    "eqbench_cw": ("eqbench_cw_v3", "eqbench_cw_v3_sample"),
}


def shared_data_dir() -> Path | None:
    """`$DECOEVO_SHARED_DATA`, else `<repo>/../shared/data` for a source checkout; None if neither exists."""
    env = os.environ.get("DECOEVO_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(Path(__file__).resolve().parents[4].parent / "shared" / "data")
    return next((c for c in candidates if c.is_dir()), None)


def default_path(name: str) -> Path | None:
    """The shared copy of benchmark `name` (full set preferred over a sample), or None when absent."""
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark format {name!r}; known: {', '.join(BENCHMARKS)}")
    root = shared_data_dir()
    if root is None:
        return None
    return next((root / rel for rel in _SHARED.get(name, ()) if (root / rel).exists()), None)


def load_benchmark(name: str, path: Path | str | None = None) -> list[Question]:
    """Load benchmark `name` from `path`, or from its shared copy when no path is given."""
    if name not in BENCHMARKS:
        raise KeyError(f"unknown benchmark format {name!r}; known: {', '.join(BENCHMARKS)}")
    where = path if path is not None else default_path(name)
    if where is None:
        from ...lm.errors import ConfigError

        raise ConfigError(f"no path given for {name!r} and no shared copy found; pass the data file")
    return BENCHMARKS[name](where)


__all__ = [
    "BENCHMARKS",
    "Loader",
    "default_path",
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
    "shared_data_dir",
]
