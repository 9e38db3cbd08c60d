"""Helpers shared by the benchmark loaders: reading JSON and JSONL files, naming record locations,
checking fields, building questions.

JSONL records are located by line; records inside one JSON document by a JSONPath-like reference
(`$[3]`, `$["医疗知识"][2]`) that goes into the error's field, so the user can find the record.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..domain import Question, Turn
from ..errors import DatasetError
from ..userfiles import surrogate_at


def read_text_file(path: Path) -> str:
    """A data file's text, or a DatasetError naming the problem (missing, or the line that is not UTF-8)."""
    if not path.is_file():
        raise DatasetError(path, None, None, "file not found")
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")  # a leading byte-order mark (Windows editors) is not data
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise DatasetError(path, line, None, "not valid UTF-8; re-save the file as UTF-8") from None


def parse_json(path: Path, line: int | None, text: str) -> Any:
    """One JSON document (a JSONL line, or a whole file when `line` is None), refused with its location
    when it is not JSON, is nested too deeply for the parser, or holds text that is not valid Unicode."""
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DatasetError(path, line if line is not None else exc.lineno, None,
                           f"not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise DatasetError(path, line, None, "nested too deeply to read (JSON nesting in the thousands)") from None
    bad = surrogate_at(obj)
    if bad is not None:
        raise DatasetError(path, line, bad or None, "holds a lone UTF-16 surrogate (e.g. \\ud800), which is not "
                           "valid Unicode text; fix the escape")
    return obj


MAX_POINTS = 1e6  # far above any benchmark's scale; keeps sums of points finite (no inf/inf = NaN scores)


def need_points(path: Path, line: int | None, name: str, value: Any, *, positive: bool = False) -> float:
    """A criterion's points or weight: a finite number within ±MAX_POINTS (positive when asked)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise DatasetError(path, line, name, "must be a number")
    if abs(value) > MAX_POINTS:
        raise DatasetError(path, line, name, f"{value:g} is out of range; points must be within ±{MAX_POINTS:g}")
    if positive and not value > 0:
        raise DatasetError(path, line, name, "must be a positive number")
    return float(value)


def need_id(path: Path, line: int | None, name: str, value: Any) -> str:
    """A question id: a non-empty string or an integer. null, true, numbers with a fraction, lists and
    objects are refused, not turned into "None" or "True"."""
    if isinstance(value, bool) or not isinstance(value, str | int) or not str(value).strip():
        shown = ("null" if value is None else "an empty string" if isinstance(value, str) else
                 {bool: str(value).lower(), dict: "an object", list: "a list"}.get(type(value), repr(value)[:40]))
        raise DatasetError(path, line, name, f"must be a non-empty string or an integer (got {shown})")
    return str(value)


def iter_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    text = read_text_file(path)
    # split on "\n" only: str.splitlines() also splits on U+2028 and friends, which JSON strings may hold
    for n, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        obj = parse_json(path, n, raw)
        if not isinstance(obj, dict):
            raise DatasetError(path, n, None, "each line must be a JSON object")
        yield n, obj


def turns_from(path: Path, line: int, prompt: Any) -> tuple[Turn, ...]:
    """A prompt given as text, or as a list of {role, content} turns."""
    if isinstance(prompt, str):
        if not prompt.strip():
            raise DatasetError(path, line, "prompt", "is empty")
        return (Turn(role="user", content=prompt),)
    if isinstance(prompt, list) and prompt:
        try:
            turns = tuple(Turn.model_validate(t) for t in prompt)
        except ValidationError as exc:
            raise DatasetError(path, line, "prompt", f"turns need role (system/user/assistant) and content: "
                               f"{exc.errors()[0]['msg']}") from None
        for i, turn in enumerate(turns):
            # As an empty prompt is: only an assistant turn may be "" (the solver's own earlier answer).
            if not turn.content.strip() and not turn.is_open:
                raise DatasetError(path, line, f"prompt[{i}].content", f"is empty (a {turn.role} turn); only an "
                                   'assistant turn may be "", for the answer the solver writes itself')
        return turns
    raise DatasetError(path, line, "prompt", "must be a non-empty string or a list of {role, content} turns")


def read_json(path: Path) -> Any:
    return parse_json(path, None, read_text_file(path))


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


def build_question(path: Path, line: int, **fields: Any) -> Question:
    """A Question from a JSONL line, or a DatasetError naming the line and the field at fault."""
    try:
        return Question(**fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise DatasetError(path, line, ".".join(str(p) for p in err["loc"]) or None, err["msg"]) from None


def unique_by_line(path: Path, questions: list[tuple[int, Question]]) -> list[Question]:
    """Reject duplicate ids in a JSONL file, naming both lines."""
    seen: dict[str, int] = {}
    for line, q in questions:
        if q.id in seen:
            raise DatasetError(path, line, "id", f"duplicate id '{q.id}' (first on line {seen[q.id]})")
        seen[q.id] = line
    return [q for _, q in questions]
