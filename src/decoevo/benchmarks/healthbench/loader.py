"""HealthBench: one conversation per line; rubric items carry signed points and tags.

Record: {prompt: [{role, content}...], prompt_id, rubrics: [{criterion, points, tags}], example_tags, ...}.
"""

from __future__ import annotations

from pathlib import Path

from ...domain import GoldItem, GoldRubric, Question
from ...tasks.errors import DatasetError
from ..common import build_question, iter_jsonl, need_id, need_points, turns_from, unique_by_line


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
        try:
            items = tuple(GoldItem(text=r["criterion"], points=float(r["points"]), tags=tuple(r.get("tags", ())))
                          for r in obj["rubrics"])
        except (KeyError, TypeError, ValueError) as exc:
            raise DatasetError(path, n, "rubrics", f"each item needs criterion and points ({exc})") from None
        for i, r in enumerate(obj["rubrics"]):
            need_points(path, n, f"rubrics[{i}].points", r["points"])
        out.append((n, build_question(path, n, id=need_id(path, n, "prompt_id", obj["prompt_id"]), task="healthbench",
                                      turns=turns_from(path, n, obj["prompt"]),
                                      gold=GoldRubric(scheme="healthbench", items=items),
                                      meta={"example_tags": obj.get("example_tags", [])})))
    if not out:
        raise DatasetError(path, None, None, "contains no questions")
    return unique_by_line(path, out)
