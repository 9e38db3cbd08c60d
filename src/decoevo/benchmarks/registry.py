"""The benchmarks decoevo knows, in the paper's column order, and lookups by format name or gold scheme.

A benchmark's folder is imported when that benchmark is first used, not when the registry is: each folder
brings its loader, grader, official-prompt parser and data source, which a run on one benchmark (or on the
user's own data) never needs for the others, and every run used to pay for all of them before its first call
(bench/client/startup.py, tests/test_startup.py). What the lookups need before that (format name, gold scheme,
task names) is data in `ENTRIES`; tests/test_benchmarks_registry.py checks it against every folder's record.

Adding a benchmark: a folder `decoevo/benchmarks/<name>/` whose `__init__` builds a `Benchmark` record named
`BENCHMARK`, and one line in `ENTRIES`.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping, MutableMapping
from pathlib import Path
from typing import NamedTuple

from ..domain import Question
from ..lm.errors import ConfigError
from .custom import loader as custom_loader
from .record import Benchmark


class Entry(NamedTuple):
    module: str  # the benchmark's folder, relative to this package; its `BENCHMARK` is the record
    scheme: str  # the gold scheme its loader writes and its grader reads
    tasks: tuple[str, ...] = ()  # extra task names whose structural spec is this benchmark's


# By format name, in the paper's column order (users' own data last).
ENTRIES: dict[str, Entry] = {
    "healthbench": Entry(".healthbench", "healthbench"),
    "writingbench": Entry(".writingbench", "writingbench"),
    "scholarqa_cs": Entry(".scholarqa_cs", "scholarqa_cs"),
    "researchqa": Entry(".researchqa", "researchqa"),
    "llmeval_med": Entry(".llmeval_med", "llmeval_med"),
    "eqbench_cw": Entry(".eqbench_cw", "eqbench_cw"),
    "jsonl": Entry(".custom", "weighted", ("generic",)),
}
CUSTOM = "jsonl"  # the format of users' own data, whose structural spec is the generic one

_SCHEME_TO_NAME: dict[str, str] = {entry.scheme: name for name, entry in ENTRIES.items()}
custom_loader.KNOWN_SCHEMES = tuple(_SCHEME_TO_NAME)  # users' gold rubrics are checked against these at load


def _load(name: str) -> Benchmark:
    """The record of benchmark `name`, its folder imported now (once; Python keeps the module)."""
    entry = ENTRIES[name]
    bench: Benchmark = importlib.import_module(entry.module, __package__).BENCHMARK
    if (bench.name, bench.scheme, bench.tasks) != (name, entry.scheme, entry.tasks):  # a folder edited alone
        raise RuntimeError(f"benchmarks/{entry.module[1:]} declares {bench.name!r} (scheme {bench.scheme!r}, "
                           f"tasks {bench.tasks}), but the registry lists {name!r} (scheme {entry.scheme!r}, "
                           f"tasks {entry.tasks})")
    return bench


class LazyBenchmarks(MutableMapping[str, Benchmark]):
    """A mapping key -> `Benchmark` whose keys are known without importing any folder; a value is imported when
    it is first looked up. `in`, `len` and iterating the keys import nothing. Setting a key replaces (or adds)
    its record, as with the dict this was (tests replace a benchmark's data source this way)."""

    def __init__(self, names: Mapping[str, str]) -> None:
        self._names = dict(names)  # key -> format name
        self._records: dict[str, Benchmark] = {}

    def __getitem__(self, key: str) -> Benchmark:
        if key not in self._records:
            self._records[key] = _load(self._names[key])
        return self._records[key]

    def __setitem__(self, key: str, bench: Benchmark) -> None:
        self._names.setdefault(key, bench.name)
        self._records[key] = bench

    def __delitem__(self, key: str) -> None:
        del self._names[key]
        self._records.pop(key, None)

    def __contains__(self, key: object) -> bool:
        return key in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return f"LazyBenchmarks({list(self._names)})"


BENCHMARKS = LazyBenchmarks({name: name for name in ENTRIES})
BY_SCHEME = LazyBenchmarks(_SCHEME_TO_NAME)


def get_benchmark(name: str) -> Benchmark:
    """The benchmark with format name `name`; a ConfigError naming the known ones otherwise."""
    if name not in BENCHMARKS:
        raise ConfigError(f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)}")
    return BENCHMARKS[name]


def find(name: str) -> Benchmark | None:
    """By format name or by gold scheme (reports show either)."""
    return BENCHMARKS.get(name) or BY_SCHEME.get(name)


def load_benchmark(name: str, path: Path | str) -> list[Question]:
    return get_benchmark(name).load(path)


def task_benchmark(task: str) -> str:
    """The format name of the benchmark whose structural spec a task family uses: the benchmark named `task`
    or listing it, else users' own data (the generic spec)."""
    for name, entry in ENTRIES.items():
        if task == name or task in entry.tasks:
            return name
    return CUSTOM


def structural_spec(task: str) -> str:
    """π_str for a task family: the benchmark's own, else the generic one (users' own data)."""
    return BENCHMARKS[task_benchmark(task)].task_spec
