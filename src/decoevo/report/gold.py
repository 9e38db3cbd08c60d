"""Whether a run's test questions carry gold rubrics (what `decoevo align` compares against), read from
the run's data file once per file for a whole report."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any


def has_test_gold(data: Mapping[str, Any], split_ids: Mapping[str, Sequence[str]] | None) -> bool | None:
    """Whether any test question of the run has a gold rubric; None when the data file cannot be read
    from here (the commands would say so themselves)."""
    if split_ids is None or not split_ids.get("test"):
        return None
    path = Path(str(data.get("path") or ""))
    try:
        stat = path.stat()
    except OSError:
        return None
    gold = _gold_ids(str(path), str(data.get("format") or "jsonl"), stat.st_mtime_ns, stat.st_size)
    return None if gold is None else bool(gold.intersection(split_ids["test"]))


@lru_cache(maxsize=8)  # a sweep's runs share a few data files: each is read once
def _gold_ids(path: str, fmt: str, _mtime: int, _size: int) -> frozenset[str] | None:
    """The ids of the file's questions with a gold rubric (whatever the run's task or limit: its split ids
    already say which questions it holds)."""
    from ..benchmarks import get_benchmark, load_jsonl_questions

    try:
        questions = load_jsonl_questions(path) if fmt == "jsonl" else get_benchmark(fmt).load(path)
    except Exception:  # only a hint: when unknown, the command is shown and names the problem itself
        return None
    return frozenset(q.id for q in questions if q.gold is not None and q.gold.items)
