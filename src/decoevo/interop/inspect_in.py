"""An Inspect AI dataset read as decoevo's questions: JSONL or CSV samples with `input` (text or chat
messages), `target`, `id` and `metadata`, the fields Inspect's `json_dataset` and `csv_dataset` read by
default. The target (a reference answer) and the metadata stay on the question's meta, never shown to a
role; a `rubric` in the metadata (decoevo's own export: criterion and weight) becomes its weighted gold."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

from ..domain import GoldItem, GoldRubric, Question, Turn
from ..errors import DatasetError
from ..userfiles import read_user_text
from .imported import Imported

ROLES = ("system", "user", "assistant")


def _turns(path: Path, line: int, value: Any) -> tuple[Turn, ...]:
    if isinstance(value, str):
        if not value.strip():
            raise DatasetError(path, line, "input", "is empty")
        return (Turn(role="user", content=value),)
    if not isinstance(value, list) or not value:
        raise DatasetError(path, line, "input", "must be text or a non-empty list of chat messages")
    turns = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise DatasetError(path, line, f"input[{i}].role", f"must be one of {', '.join(ROLES)} (tool "
                               "messages have no place in a question)")
        content = m.get("content")
        if isinstance(content, list):  # content parts: text ones only
            if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
                       for p in content):
                raise DatasetError(path, line, f"input[{i}].content", "holds non-text content (images, audio); "
                                   "decoevo's questions are text")
            content = "\n".join(p["text"] for p in content)
        if not isinstance(content, str) or not content.strip():
            raise DatasetError(path, line, f"input[{i}].content", "must be non-empty text")
        turns.append(Turn(role=m["role"], content=content))
    if turns[-1].role != "user":
        raise DatasetError(path, line, "input", "the last message must be the user's")
    return tuple(turns)


def _gold(path: Path, line: int, metadata: dict[str, Any]) -> GoldRubric | None:
    rubric = metadata.get("rubric")
    if rubric is None:
        return None
    if not isinstance(rubric, list) or not rubric:
        raise DatasetError(path, line, "metadata.rubric", "must be a non-empty list of {criterion, weight}")
    items = []
    for i, c in enumerate(rubric):
        text = c.get("criterion") if isinstance(c, dict) else None
        weight = c.get("weight") if isinstance(c, dict) else None
        if not isinstance(text, str) or not text.strip():
            raise DatasetError(path, line, f"metadata.rubric[{i}].criterion", "must be non-empty text")
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 1e6:
            raise DatasetError(path, line, f"metadata.rubric[{i}].weight", "must be a positive number")
        items.append(GoldItem(text=text, points=float(weight)))
    return GoldRubric(scheme="weighted", items=tuple(items))


def _question(path: Path, line: int, n: int, row: dict[str, Any], seen: dict[str, int]) -> Question:
    if "input" not in row:
        raise DatasetError(path, line, "input", "is missing")
    turns = _turns(path, line, row["input"])
    raw_id = row.get("id")
    if raw_id is None or raw_id == "":
        qid = f"s{n:04d}"
    elif isinstance(raw_id, bool) or not isinstance(raw_id, str | int) or not str(raw_id).strip():
        raise DatasetError(path, line, "id", "must be a non-empty string or an integer")
    else:
        qid = str(raw_id)
    if qid in seen:
        raise DatasetError(path, line, "id", f"duplicate id '{qid}' (first on line {seen[qid]})")
    seen[qid] = line
    metadata = row.get("metadata") or {}
    if not isinstance(metadata, dict):
        raise DatasetError(path, line, "metadata", "must be an object")
    target = row.get("target")
    if target is not None and not isinstance(target, str | list):
        raise DatasetError(path, line, "target", "must be text or a list of texts")
    meta: dict[str, Any] = {"inspect": {"target": target, "metadata": {k: v for k, v in metadata.items()
                                                                       if k != "rubric"}}}
    return Question(id=qid, turns=turns, gold=_gold(path, line, metadata), meta=meta)


def _jsonl_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for n, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise DatasetError(path, n, None, f"not valid JSON ({getattr(exc, 'msg', 'nested too deeply')})") from None
        if not isinstance(obj, dict):
            raise DatasetError(path, n, None, "each line must be a sample (a JSON object)")
        rows.append((n, obj))
    return rows


def _csv_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """CSV samples: columns input, target and id; every other column goes into the metadata."""
    reader = csv.DictReader(io.StringIO(text))
    rows = []
    try:
        for row in reader:
            if None in row:
                raise DatasetError(path, reader.line_num, None, "has more cells than the header has columns")
            meta = {k: v for k, v in row.items() if k not in ("input", "target", "id")}
            rows.append((reader.line_num, {"input": row.get("input"), "target": row.get("target"),
                                           "id": row.get("id"), "metadata": meta}))
    except csv.Error as exc:
        raise DatasetError(path, reader.line_num, None, f"not valid CSV ({exc})") from None
    if rows and rows[0][1]["input"] is None:
        raise DatasetError(path, 1, "input", "the header has no input column")
    return rows


def read_inspect(path: Path) -> Imported:
    text = read_user_text(path, "Inspect dataset")
    rows = _csv_rows(path, text) if path.suffix.lower() == ".csv" else _jsonl_rows(path, text)
    seen: dict[str, int] = {}
    questions = tuple(_question(path, line, n, row, seen) for n, (line, row) in enumerate(rows, 1))
    if not questions:
        raise DatasetError(path, None, None, "contains no samples")
    return Imported(source=str(path), format="inspect", questions=questions)
