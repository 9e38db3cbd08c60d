"""LLMEval-Med: Chinese medical questions with a reference answer and a checklist; one 1-5 score per answer.

File: a JSON object keyed by category, each a list of records
{category1, category2, scene, round, problem, groupCode, sanswer, difficulty, checklist}.

How the real records state their requirements (inspected on the sample):
- most knowledge records have `checklist` text: "核心需求：\\n1. ...\\n\\n次要需求：\\n1. ...";
- safety/ethics records have no checklist; their `sanswer` *is* the requirement list, with headers such as
  "一、核心需求：" and unnumbered lines, some followed by "- ..." sub-points;
- reasoning, language-understanding and generation records have no checklist (absent or NaN): the
  reference answer alone is the standard.
Each requirement becomes a GoldItem tagged "core" or "secondary"; a record without requirements gets a
single item "agrees with the reference answer" tagged "reference". `meta` keeps the raw checklist text
(`checklist_raw`), where it came from (`checklist_source`) and the reference answer.

Ids are `<category key>-<position>`, unique in a file. A record with round > 1 continues the
conversation of the earlier rounds of its (category, groupCode): those problems and their reference
answers become the preceding turns, as far as they are in the file (`meta["history_complete"]`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ...domain import GoldItem, GoldRubric, Question, Turn
from ..errors import DatasetError
from .common import build, field_name, is_missing, need_object, need_text, read_json, ref, unique

LEVELS = {"核心需求": "core", "次要需求": "secondary"}
_HEADER = re.compile(r"^\s*(?:[一二三四五六七八九十]+\s*[、.．]\s*)?(核心需求|次要需求)\s*[：:]?\s*(.*)$")
_NUMBERED = re.compile(r"^\s*\d+\s*[.、．)）]\s*(.*)$")
_BULLET = re.compile(r"^\s*[-*•·]\s*")
REFERENCE_ITEM = "The answer agrees with the reference answer on every point that matters."


def parse_checklist(text: str) -> list[tuple[str, str]]:
    """Split checklist text into (level, requirement) pairs, level in core/secondary/unspecified.

    Inside a section, numbered lines start items when there are any; otherwise every line starts one,
    except "- " sub-points and lines following an item that ends with a colon, which continue it."""
    sections: list[tuple[str, list[str]]] = [("unspecified", [])]
    for line in text.split("\n"):
        m = _HEADER.match(line)
        if m:
            sections.append((LEVELS[m.group(1)], [m.group(2)] if m.group(2).strip() else []))
        elif line.strip():
            sections[-1][1].append(line.strip())
    out: list[tuple[str, str]] = []
    for level, lines in sections:
        numbered = any(_NUMBERED.match(ln) for ln in lines)
        items: list[list[str]] = []
        for ln in lines:
            num = _NUMBERED.match(ln)
            if numbered:
                starts = bool(num)
            else:
                open_item = bool(items) and (items[-1][-1].endswith(("：", ":")) or len(items[-1]) > 1)
                starts = not _BULLET.match(ln) and not open_item
            if starts or not items:
                items.append([num.group(1) if num else ln])
            else:
                items[-1].append(ln)
        out += [(level, "\n".join(parts)) for parts in items if "".join(parts).strip()]
    return out


def _requirements(path: Path, where: str, rec: dict[str, Any], answer: str) -> tuple[str, str, list[GoldItem]]:
    raw = rec.get("checklist")
    if not is_missing(raw) and not isinstance(raw, str):
        raise DatasetError(path, None, field_name(where, "checklist"), "must be text (or absent)")
    if isinstance(raw, str) and raw.strip():
        source, text = "checklist", raw
    elif any(h in answer for h in LEVELS):
        source, text = "reference", answer
    else:
        return "none", "", [GoldItem(text=REFERENCE_ITEM, tags=("reference",), extra={"level": "reference"})]
    pairs = parse_checklist(text)
    if not pairs:
        raise DatasetError(path, None, field_name(where, source if source == "checklist" else "sanswer"),
                           "holds no requirement")
    items = [GoldItem(text=t, tags=(lvl,), extra={"level": lvl, "index": k}) for k, (lvl, t) in enumerate(pairs)]
    return source, text, items


def _round(path: Path, where: str, rec: dict[str, Any]) -> int:
    value = rec.get("round", 1)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise DatasetError(path, None, field_name(where, "round"), "must be a positive integer")
    return value


def load_llmeval_med(path: Path | str) -> list[Question]:
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise DatasetError(path, None, None, "must be a JSON object keyed by category")
    records: list[tuple[str, str, int, dict[str, Any]]] = []
    for key, recs in data.items():
        if not isinstance(recs, list):
            raise DatasetError(path, None, ref(key), "must be a list of records")
        records += [(key, ref(key, i), i, need_object(path, None, ref(key, i), rec)) for i, rec in enumerate(recs)]
    # (category, groupCode, round) -> (problem, reference answer), for earlier rounds of a conversation
    rounds: dict[tuple[str, Any, int], tuple[str, str]] = {}
    parsed = []
    for key, where, i, rec in records:
        problem = need_text(path, None, where, rec, "problem")
        answer = need_text(path, None, where, rec, "sanswer")
        rnd = _round(path, where, rec)
        group = rec.get("groupCode")
        if group is not None and (isinstance(group, bool) or not isinstance(group, int | str)):
            raise DatasetError(path, None, field_name(where, "groupCode"), "must be an integer or a string")
        if group is not None:
            rounds.setdefault((key, group, rnd), (problem, answer))
        parsed.append((key, where, i, rec, problem, answer, rnd, group))
    out = []
    for key, where, i, rec, problem, answer, rnd, group in parsed:
        history: list[Turn] = []
        complete = True
        for earlier in range(1, rnd):
            prev = rounds.get((key, group, earlier)) if group is not None else None
            if prev is None:
                complete = False
                continue
            history += [Turn(role="user", content=prev[0]), Turn(role="assistant", content=prev[1])]
        source, raw, items = _requirements(path, where, rec, answer)
        meta = {k: rec[k] for k in ("category1", "category2", "scene", "difficulty") if not is_missing(rec.get(k))}
        meta.update(category_key=key, groupCode=group, round=rnd, history_complete=complete,
                    reference_answer=answer, checklist_source=source, checklist_raw=raw)
        out.append((None, where, build(path, None, where, id=f"{key}-{i}", task="llmeval_med",
                                       turns=(*history, Turn(role="user", content=problem)),
                                       gold=GoldRubric(scheme="llmeval_med", items=tuple(items)), meta=meta)))
    return unique(path, out)
