"""An Inspect AI dataset read as decoevo's questions: JSONL, a JSON array or CSV samples with `input` (text
or chat messages), `target`, `id` and `metadata`, the fields Inspect's `json_dataset` and `csv_dataset`
read by default. A `rubric` in the metadata (decoevo's own export: criterion and weight) becomes the
question's weighted gold rubric; else the target (a reference answer) becomes a one-criterion gold rubric,
so `decoevo compare` grades against it. The target, the metadata and any other sample field stay verbatim
on the question's `meta["inspect"]`, never shown to a role; the summary counts what was used and what not."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from ..domain import GoldItem, GoldRubric, Question, Turn
from ..errors import DatasetError
from .imported import Imported, ImportSummary, Use
from .importfiles import csv_records, plain, read_import_text

ROLES = ("system", "user", "assistant")
SAMPLE_FIELDS = ("input", "target", "id", "metadata")
UNUSED = {  # Inspect sample fields decoevo has no use for, and why
    "choices": "multiple-choice options Inspect's multiple_choice solver shows; decoevo asks the input alone",
    "sandbox": "Inspect's sandbox runs these; decoevo cannot",
    "files": "files copied into Inspect's sandbox; decoevo has none",
    "setup": "a script Inspect's sandbox runs; decoevo cannot",
}


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


def _gold(path: Path, line: int, metadata: dict[str, Any], target: str | list[str] | None) -> GoldRubric | None:
    rubric = metadata.get("rubric")
    if rubric is None:
        return _target_gold(target)
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


def _target_gold(target: str | list[str] | None) -> GoldRubric | None:
    """A reference answer as a one-criterion gold rubric. A list is Inspect's several acceptable answers
    (its `match` and `includes` scorers take any one), so one criterion names them all, not one each."""
    refs = [t.strip() for t in ([target] if isinstance(target, str) else target or []) if t.strip()]
    if not refs:
        return None
    text = (f"The answer agrees with the reference answer: {refs[0]}" if len(refs) == 1 else
            "The answer agrees with one of the reference answers: " + " | ".join(refs))
    return GoldRubric(scheme="weighted", items=(GoldItem(text=text, points=1.0),))


def _target(path: Path, line: int, target: Any) -> str | list[str] | None:
    if target is None or isinstance(target, str):
        return target
    if isinstance(target, list) and all(isinstance(t, str) for t in target):
        return list(target)
    raise DatasetError(path, line, "target", "must be text or a list of texts")


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
    target = _target(path, line, row.get("target"))
    kept = {"target": target, "metadata": {k: v for k, v in metadata.items() if k != "rubric"},
            **{str(k): v for k, v in row.items() if k not in ("input", "id", "target", "metadata")}}
    meta: dict[str, Any] = {"inspect": plain(kept, path, line, "sample")}
    return Question(id=qid, turns=turns, gold=_gold(path, line, metadata, target), meta=meta)


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _loads(path: Path, line: int, text: str) -> Any:
    try:
        return json.loads(text, parse_constant=_no_constant)
    except json.JSONDecodeError as exc:
        raise DatasetError(path, line + text.count("\n", 0, exc.pos), None, f"not valid JSON ({exc.msg})") from None
    except (RecursionError, ValueError) as exc:
        problem = "nested too deeply" if isinstance(exc, RecursionError) else str(exc)
        raise DatasetError(path, line, None, f"not valid JSON ({problem})") from None


def _jsonl_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    rows = []
    for n, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        obj = _loads(path, n, raw)
        if not isinstance(obj, dict):
            raise DatasetError(path, n, None, "each line must be a sample (a JSON object)")
        rows.append((n, obj))
    return rows


def _json_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """A `.json` dataset: one array of samples (Inspect's json_dataset), each named by the line it starts on."""
    value = _loads(path, 1, text)
    if not isinstance(value, list):
        raise DatasetError(path, 1, None, "a .json dataset is an array of samples")
    starts = _element_lines(text)
    rows = []
    for i, obj in enumerate(value):
        line = starts[i] if i < len(starts) else 1
        if not isinstance(obj, dict):
            raise DatasetError(path, line, f"[{i}]", "must be a sample (a JSON object)")
        rows.append((line, obj))
    return rows


def _element_lines(text: str) -> list[int]:
    """The line each top-level array element starts on (the text is already known to be a JSON array)."""
    decoder = json.JSONDecoder()
    pos = text.index("[") + 1
    out: list[int] = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            return out
        out.append(text.count("\n", 0, pos) + 1)
        _, pos = decoder.raw_decode(text, pos)


def _csv_rows(path: Path, text: str) -> list[tuple[int, dict[str, Any]]]:
    """CSV samples: columns input, target and id; every other column goes into the metadata."""
    records = csv_records(path, text)
    if records and "input" not in records[0][1]:
        raise DatasetError(path, 1, "input", "the header has no input column")
    return [(line, {"input": row["input"], "target": row.get("target"), "id": row.get("id"),
                    "metadata": {k: v for k, v in row.items() if k not in ("input", "target", "id")}})
            for line, row in records]


def _summary(rows: list[tuple[int, dict[str, Any]]], questions: tuple[Question, ...]) -> ImportSummary:
    fields: Counter[str] = Counter(str(k) for _, row in rows for k in row)
    uses = []
    rubric = sum(1 for _, row in rows if isinstance(row.get("metadata"), dict) and "rubric" in row["metadata"])
    target = sum(1 for q in questions if q.gold is not None) - rubric
    if rubric:
        uses.append(Use("metadata.rubric", rubric, "gold rubric"))
    if target:
        uses.append(Use("target", target, "gold rubric (one criterion: agrees with the reference)"))
    for name, count in fields.most_common():
        if name in UNUSED:
            uses.append(Use(name, count, None, UNUSED[name]))
        elif name not in SAMPLE_FIELDS:
            uses.append(Use(name, count, None, "not an Inspect sample field; kept on the question"))
    no_gold = sum(1 for q in questions if q.gold is None)
    notes = ((f"{no_gold} of {len(questions)} samples have no target or rubric: no gold rubric, so "
              "the test split takes samples that have one first (`decoevo compare` and `decoevo eval` grade against "
              "it and refuse a test split holding one without)"),) if no_gold else ()
    return ImportSummary(unit="samples", read=len(questions), uses=tuple(uses), notes=notes)


def read_inspect(path: Path) -> Imported:
    text = read_import_text(path, "Inspect dataset")
    suffix = path.suffix.lower()
    rows = (_csv_rows(path, text) if suffix == ".csv" else _json_rows(path, text) if suffix == ".json"
            else _jsonl_rows(path, text))
    seen: dict[str, int] = {}
    questions = tuple(_question(path, line, n, row, seen) for n, (line, row) in enumerate(rows, 1))
    if not questions:
        raise DatasetError(path, None, None, "contains no samples")
    return Imported(source=str(path), format="inspect", questions=questions, summary=_summary(rows, questions))
