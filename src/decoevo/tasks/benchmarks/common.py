"""Helpers shared by the benchmark loaders: reading JSON files, naming record locations, checking fields.

JSONL records are located by line; records inside one JSON document by a JSONPath-like reference
(`$[3]`, `$["医疗知识"][2]`) that goes into the error's field, so the user can find the record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ...domain import Question
from ..errors import DatasetError
from ..loaders import read_text_file


def read_json(path: Path) -> Any:
    text = read_text_file(path)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(path, exc.lineno, None, f"not valid JSON ({exc.msg} at column {exc.colno})") from None


def ref(*parts: str | int) -> str:
    """Where a record sits in a JSON document: `ref(3)` -> `$[3]`, `ref("医疗知识", 2)` -> `$["医疗知识"][2]`."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f"[{json.dumps(p, ensure_ascii=False)}]"
                         for p in parts)


def field_name(where: str | None, name: str) -> str:
    """A field inside a record: plain for JSONL (the line says where), prefixed for JSON documents."""
    return name if where is None else f"{where}.{name}"


def is_missing(value: Any) -> bool:
    """None, an absent key, or the NaN that pandas-exported JSON uses for an empty cell."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def need(path: Path, line: int | None, where: str | None, obj: dict[str, Any], key: str) -> Any:
    if key not in obj or is_missing(obj[key]):
        raise DatasetError(path, line, field_name(where, key), "is missing")
    return obj[key]


def need_text(path: Path, line: int | None, where: str | None, obj: dict[str, Any], key: str) -> str:
    value = need(path, line, where, obj, key)
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(path, line, field_name(where, key), "must be a non-empty string")
    return value


def need_list(path: Path, line: int | None, where: str | None, obj: dict[str, Any], key: str) -> list[Any]:
    value = need(path, line, where, obj, key)
    if not isinstance(value, list) or not value:
        raise DatasetError(path, line, field_name(where, key), "must be a non-empty list")
    return value


def need_object(path: Path, line: int | None, where: str | None, value: Any, name: str = "") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise DatasetError(path, line, (where if not name else field_name(where, name)) or None,
                           "must be a JSON object")
    return value


def build(path: Path, line: int | None, where: str | None, **fields: Any) -> Question:
    try:
        return Question(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        name = ".".join(str(p) for p in err["loc"]) or "record"
        raise DatasetError(path, line, field_name(where, name), err["msg"]) from None


def unique(path: Path, located: Sequence[tuple[int | None, str | None, Question]]) -> list[Question]:
    """Reject duplicate ids and empty files; returns the questions in file order."""
    if not located:
        raise DatasetError(path, None, None, "contains no questions")
    seen: dict[str, str] = {}
    for line, where, q in located:
        here = f"line {line}" if line is not None else (where or "?")
        if q.id in seen:
            raise DatasetError(path, line, field_name(where, "id"), f"duplicate id '{q.id}' (first at {seen[q.id]})")
        seen[q.id] = here
    return [q for _, _, q in located]
