"""HealthBench: one conversation per line; rubric items carry signed points and tags.

Record: {prompt: [{role, content}...], prompt_id, rubrics: [{criterion, points, tags}], example_tags, ...}.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...domain import GoldItem, GoldRubric, Question
from ...errors import DatasetError
from ..common import (
    build_question,
    iter_jsonl,
    need,
    need_id,
    need_list,
    need_object,
    need_points,
    need_text,
    turns_from,
    unique_by_line,
)


def _item(path: Path, line: int, i: int, raw: Any) -> GoldItem:
    """One rubric item: {criterion, points, tags}, refused with its index and field."""
    where = f"rubrics[{i}]"
    item = need_object(path, line, where, raw)
    tags = item.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise DatasetError(path, line, f"{where}.tags", "must be a list of strings")
    return GoldItem(text=need_text(path, line, where, item, "criterion"), tags=tuple(tags),
                    points=need_points(path, line, f"{where}.points", need(path, line, where, item, "points")))


def load_healthbench(path: Path | str) -> list[Question]:
    """HealthBench: prompt is a conversation; rubric items carry signed points and tags."""
    path = Path(path)
    out = []
    for n, obj in iter_jsonl(path):
        for key in ("prompt_id", "prompt", "rubrics"):
            if key not in obj:
                raise DatasetError(path, n, key, "is missing")
        if not obj["rubrics"]:
            raise DatasetError(path, n, "rubrics", "is empty")
        items = tuple(_item(path, n, i, r) for i, r in enumerate(need_list(path, n, None, obj, "rubrics")))
        out.append((n, build_question(path, n, id=need_id(path, n, "prompt_id", obj["prompt_id"]), task="healthbench",
                                      turns=turns_from(path, n, obj["prompt"]),
                                      gold=GoldRubric(scheme="healthbench", items=items),
                                      meta={"example_tags": obj.get("example_tags", [])})))
    if not out:
        raise DatasetError(path, None, None, "contains no questions")
    return unique_by_line(path, out)
