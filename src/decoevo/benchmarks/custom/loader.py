"""Users' own questions: plain JSONL, with an optional weighted gold rubric per question.

Plain JSONL, one question per line:
  {"id": "q1", "prompt": "text" | [{"role": "user", "content": "..."}], "task": "generic",
   "gold": {"scheme": "weighted", "items": [{"text": "...", "points": 2}]}}   # gold is optional
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...domain import GoldItem, GoldRubric, Question
from ...errors import DatasetError
from ..common import build_question, iter_jsonl, need_id, need_points, turns_from, unique_by_line

ITEM_FIELDS = frozenset({"text", "points", "tags", "extra"})


# The gold schemes a grader exists for, checked at load rather than at eval. The registry fills this in
# when it is built (it imports this loader, so the loader cannot import it back).
KNOWN_SCHEMES: tuple[str, ...] = ()


def known_schemes() -> tuple[str, ...]:
    return KNOWN_SCHEMES


def _gold(path: Path, line: int, g: Any) -> GoldRubric:
    """A user's gold rubric: {"scheme": "weighted", "items": [{"text": "...", "points": 2}, ...]}."""
    items = g.get("items") if isinstance(g, dict) else None
    if not isinstance(items, list) or not items:
        raise DatasetError(path, line, "gold.items", "a gold rubric needs at least one item")
    scheme = g.get("scheme", "weighted")
    if not isinstance(scheme, str) or scheme not in known_schemes():
        raise DatasetError(path, line, "gold.scheme", f"unknown grading scheme {scheme!r}; known: "
                           + ", ".join(known_schemes()))
    unknown = sorted(set(g) - {"scheme", "items"})
    if unknown:
        raise DatasetError(path, line, f"gold.{unknown[0]}", "unknown field; gold has scheme and items")
    out = []
    for i, item in enumerate(items):
        where = f"gold.items[{i}]"
        if not isinstance(item, dict):
            raise DatasetError(path, line, where, 'must be a JSON object {"text": "...", "points": 2}')
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(path, line, f"{where}.text", "must be a non-empty string")
        unknown = sorted(set(item) - ITEM_FIELDS)
        if unknown:  # e.g. "weight" for "points": read silently, it would count as the default 1 point
            raise DatasetError(path, line, f"{where}.{unknown[0]}", "unknown field; an item has "
                               + ", ".join(sorted(ITEM_FIELDS)) + " (its value is \"points\")")
        need_points(path, line, f"{where}.points", item.get("points", 1.0))
        try:
            out.append(GoldItem(**item))
        except (TypeError, ValidationError) as exc:
            errors = exc.errors() if isinstance(exc, ValidationError) else []
            name = ".".join(str(p) for p in errors[0]["loc"]) if errors else ""
            problem = errors[0]["msg"] if errors else "has an unexpected field"
            raise DatasetError(path, line, f"{where}.{name}" if name else where, problem) from None
    if scheme == "weighted" and not any(item.points > 0 for item in out):
        raise DatasetError(path, line, "gold.items", "a weighted gold rubric needs at least one item with "
                           "positive points (negative points mark what to avoid)")
    return GoldRubric(scheme=scheme, items=tuple(out))


def load_jsonl_questions(path: Path | str, task: str = "generic") -> list[Question]:
    path = Path(path)
    out = []
    for n, obj in iter_jsonl(path):
        for key in ("id", "prompt"):
            if key not in obj:
                raise DatasetError(path, n, key, "is missing")
        gold = _gold(path, n, obj["gold"]) if obj.get("gold") is not None else None
        out.append((n, build_question(path, n, id=need_id(path, n, "id", obj["id"]), task=obj.get("task", task),
                              turns=turns_from(path, n, obj["prompt"]), gold=gold, meta=obj.get("meta", {}))))
    if not out:
        raise DatasetError(path, None, None, "contains no questions")
    return unique_by_line(path, out)
