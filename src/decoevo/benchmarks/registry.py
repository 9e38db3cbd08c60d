"""The benchmarks decoevo knows, in the paper's column order, and lookups by format name or gold scheme.

Adding a benchmark: a folder `decoevo/benchmarks/<name>/` whose `__init__` builds a `Benchmark` record,
and one line below.
"""

from __future__ import annotations

from pathlib import Path

from ..domain import Question
from ..lm.errors import ConfigError
from . import custom, eqbench_cw, healthbench, llmeval_med, researchqa, scholarqa_cs, writingbench
from .custom import loader as custom_loader
from .record import Benchmark

_ALL: tuple[Benchmark, ...] = (
    healthbench.BENCHMARK,
    writingbench.BENCHMARK,
    scholarqa_cs.BENCHMARK,
    researchqa.BENCHMARK,
    llmeval_med.BENCHMARK,
    eqbench_cw.BENCHMARK,
    custom.BENCHMARK,
)

BENCHMARKS: dict[str, Benchmark] = {b.name: b for b in _ALL}
BY_SCHEME: dict[str, Benchmark] = {b.scheme: b for b in _ALL}
custom_loader.KNOWN_SCHEMES = tuple(BY_SCHEME)  # users' gold rubrics are checked against these at load


def get_benchmark(name: str) -> Benchmark:
    """The benchmark with format name `name`; a ConfigError naming the known ones otherwise."""
    if name not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    return BENCHMARKS[name]


def for_scheme(scheme: str) -> Benchmark | None:
    return BY_SCHEME.get(scheme)


def find(name: str) -> Benchmark | None:
    """By format name or by gold scheme (reports show either)."""
    return BENCHMARKS.get(name) or BY_SCHEME.get(name)


def load_benchmark(name: str, path: Path | str) -> list[Question]:
    return get_benchmark(name).load(path)


def structural_spec(task: str) -> str:
    """π_str for a task family: the benchmark's own, else the generic one (users' own data)."""
    for b in _ALL:
        if task == b.name or task in b.tasks:
            return b.task_spec
    return custom.BENCHMARK.task_spec
