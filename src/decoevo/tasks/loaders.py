"""Loading questions: plain JSONL for users' own tasks, and HealthBench.

Plain JSONL, one question per line:
  {"id": "q1", "prompt": "text" | [{"role": "user", "content": "..."}], "task": "generic",
   "gold": {"scheme": "weighted", "items": [{"text": "...", "points": 2}]}}   # gold is optional
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..domain import GoldItem, GoldRubric, Question, Turn
from .errors import DatasetError


def read_text_file(path: Path) -> str:
    """A data file's text, or a DatasetError naming the problem (missing, or the line that is not UTF-8)."""
    if not path.is_file():
        raise DatasetError(path, None, None, "file not found")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise DatasetError(path, line, None, "not valid UTF-8; re-save the file as UTF-8") from None


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = read_text_file(path)
    # split on "\n" only: str.splitlines() also splits on U+2028 and friends, which JSON strings may hold
    for n, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DatasetError(path, n, None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise DatasetError(path, n, None, "each line must be a JSON object")
        yield n, obj


def _turns(path: Path, line: int, prompt: Any) -> tuple[Turn, ...]:
    if isinstance(prompt, str):
        if not prompt.strip():
            raise DatasetError(path, line, "prompt", "is empty")
        return (Turn(role="user", content=prompt),)
    if isinstance(prompt, list) and prompt:
        try:
            return tuple(Turn.model_validate(t) for t in prompt)
        except ValidationError as exc:
            raise DatasetError(path, line, "prompt", f"turns need role (system/user/assistant) and content: "
                               f"{exc.errors()[0]['msg']}") from None
    raise DatasetError(path, line, "prompt", "must be a non-empty string or a list of {role, content} turns")


def _gold(path: Path, line: int, g: Any) -> GoldRubric:
    """A user's gold rubric: {"scheme": "weighted", "items": [{"text": "...", "points": 2}, ...]}."""
    items = g.get("items") if isinstance(g, dict) else None
    if not isinstance(items, list) or not items:
        raise DatasetError(path, line, "gold.items", "a gold rubric needs at least one item")
    scheme = g.get("scheme", "weighted")
    if not isinstance(scheme, str) or not scheme.strip():
        raise DatasetError(path, line, "gold.scheme", "must be a non-empty string, e.g. \"weighted\"")
    out = []
    for i, item in enumerate(items):
        where = f"gold.items[{i}]"
        if not isinstance(item, dict):
            raise DatasetError(path, line, where, 'must be a JSON object {"text": "...", "points": 2}')
        text = item.get("text")
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(path, line, f"{where}.text", "must be a non-empty string")
        points = item.get("points", 1.0)
        if isinstance(points, bool) or not isinstance(points, int | float) or not math.isfinite(points):
            raise DatasetError(path, line, f"{where}.points", "must be a number")
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


def _build(path: Path, line: int, **fields: Any) -> Question:
    try:
        return Question(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DatasetError(path, line, ".".join(str(p) for p in err["loc"]) or None, err["msg"]) from None


def _unique(path: Path, questions: list[tuple[int, Question]]) -> list[Question]:
    seen: dict[str, int] = {}
    for line, q in questions:
        if q.id in seen:
            raise DatasetError(path, line, "id", f"duplicate id '{q.id}' (first on line {seen[q.id]})")
        seen[q.id] = line
    return [q for _, q in questions]


def load_jsonl_questions(path: Path | str, task: str = "generic") -> list[Question]:
    path = Path(path)
    out = []
    for n, obj in iter_jsonl(path):
        for key in ("id", "prompt"):
            if key not in obj:
                raise DatasetError(path, n, key, "is missing")
        gold = _gold(path, n, obj["gold"]) if obj.get("gold") is not None else None
        out.append((n, _build(path, n, id=str(obj["id"]), task=obj.get("task", task),
                              turns=_turns(path, n, obj["prompt"]), gold=gold, meta=obj.get("meta", {}))))
    if not out:
        raise DatasetError(path, None, None, "contains no questions")
    return _unique(path, out)


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
        out.append((n, _build(path, n, id=str(obj["prompt_id"]), task="healthbench",
                              turns=_turns(path, n, obj["prompt"]), gold=GoldRubric(scheme="healthbench", items=items),
                              meta={"example_tags": obj.get("example_tags", [])})))
    if not out:
        raise DatasetError(path, None, None, "contains no questions")
    return _unique(path, out)
