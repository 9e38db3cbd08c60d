"""Helpers shared by the data tests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from decoevo.benchmarks import BENCHMARKS, DataFile


def unpinned(monkeypatch: pytest.MonkeyPatch, name: str, split_name: str, records: int | None) -> DataFile:
    """Make one split of a registered benchmark unpinned, with `records` as its published count: the
    situation of a benchmark whose checksums could not be obtained (ResearchQA today), on files we have."""
    bench = BENCHMARKS[name]
    assert bench.source is not None
    split = bench.source.split(split_name)
    files = tuple(replace(f, sha256=None, size=None) for f in split.files)
    new_split = replace(split, files=files, records=records)
    source = replace(bench.source, splits=tuple(new_split if s is split else s for s in bench.source.splits))
    monkeypatch.setitem(BENCHMARKS, name, replace(bench, source=source))
    return files[0]
