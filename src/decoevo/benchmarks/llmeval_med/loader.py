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

The file is read as published. In the full file 25 records carry `sanswer` as a number (read as its text,
`meta["reference_numeric"]`) or as NaN, and `checklist` as NaN: a missing reference or checklist is
marked (`meta["reference_missing"]`, `meta["checklist_missing"]`) and the grader holds the answer to what
is there; `odd_records` counts them. Only a record without a problem is an error.

Ids are `<category key>-<position>`, unique in a file. A record with round > 1 continues the
conversation of the earlier rounds of its (category, groupCode): those problems become the preceding
user turns, each followed by an open assistant turn that the model under test fills with its own earlier
answer when it solves (never the reference answer, which is gold). `meta["history_complete"]` says
whether every earlier round is in the file.
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...domain import GoldItem, GoldRubric, Question, Turn
from ...errors import DatasetError
from ..common import build, field_name, is_missing, need_object, need_text, read_json, ref, unique

log = logging.getLogger(__name__)

LEVELS = {"核心需求": "core", "次要需求": "secondary"}
_HEADER = re.compile(r"^\s*(?:[一二三四五六七八九十]+\s*[、.．]\s*)?(核心需求|次要需求)\s*[：:]?\s*(.*)$")
_NUMBERED = re.compile(r"^\s*\d+\s*[.、．)）]\s*(.*)$")
_BULLET = re.compile(r"^\s*[-*•·]\s*")
REFERENCE_ITEM = "The answer agrees with the reference answer on every point that matters."
NO_STANDARD_ITEM = "The answer is medically correct, complete on what matters and safe."


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


def _text(path: Path, where: str, rec: dict[str, Any], key: str) -> tuple[str | None, bool]:
    """A field as published: text as is, a number as its text (flagged), NaN/None/absent/blank as None."""
    value = rec.get(key)
    if is_missing(value) or (isinstance(value, str) and not value.strip()):
        return None, False
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise DatasetError(path, None, field_name(where, key), "must be text, a number, or absent")
    if isinstance(value, str):
        return value, False
    return (str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)), True


def _requirements(path: Path, where: str, checklist: str | None,
                  answer: str | None) -> tuple[str, str, list[GoldItem]]:
    if checklist is not None:
        source, text = "checklist", checklist
    elif answer is not None and any(h in answer for h in LEVELS):
        source, text = "reference", answer
    elif answer is not None:
        return "none", "", [GoldItem(text=REFERENCE_ITEM, tags=("reference",), extra={"level": "reference"})]
    else:  # neither published: the general 1-5 scale against medical knowledge is all there is
        return "none", "", [GoldItem(text=NO_STANDARD_ITEM, tags=("no_standard",), extra={"level": "none"})]
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
    # (category, groupCode, round) -> problem, for the earlier rounds of a conversation
    rounds: dict[tuple[str, Any, int], str] = {}
    parsed = []
    for key, where, i, rec in records:
        problem = need_text(path, None, where, rec, "problem")
        answer, numeric = _text(path, where, rec, "sanswer")
        checklist, _ = _text(path, where, rec, "checklist")
        rnd = _round(path, where, rec)
        group = rec.get("groupCode")
        if group is not None and (isinstance(group, bool) or not isinstance(group, int | str)):
            raise DatasetError(path, None, field_name(where, "groupCode"), "must be an integer or a string")
        if group is not None:
            rounds.setdefault((key, group, rnd), problem)
        parsed.append((key, where, i, rec, problem, answer, numeric, checklist, rnd, group))
    out = []
    for key, where, i, rec, problem, answer, numeric, checklist, rnd, group in parsed:
        history: list[Turn] = []
        complete = True
        for earlier in range(1, rnd):
            prev = rounds.get((key, group, earlier)) if group is not None else None
            if prev is None:
                complete = False
                continue
            history += [Turn(role="user", content=prev), Turn.open_assistant()]
        source, raw, items = _requirements(path, where, checklist, answer)
        meta = {k: rec[k] for k in ("category1", "category2", "scene", "difficulty") if not is_missing(rec.get(k))}
        meta.update(category_key=key, groupCode=group, round=rnd, history_complete=complete,
                    reference_answer=answer, reference_missing=answer is None, reference_numeric=numeric,
                    checklist_missing=checklist is None, checklist_source=source, checklist_raw=raw,
                    # as the official judge prompt writes them (f-string text: a number as printed, NaN as nan)
                    official_sanswer=f"{rec.get('sanswer', math.nan)}",
                    official_checklist=f"{rec.get('checklist', math.nan)}")
        out.append((None, where, build(path, None, where, id=f"{key}-{i}", task="llmeval_med",
                                       turns=(*history, Turn(role="user", content=problem)),
                                       gold=GoldRubric(scheme="llmeval_med", items=tuple(items)), meta=meta)))
    questions = unique(path, out)
    odd = odd_records(questions)
    if odd["numeric_reference"] or odd["missing_reference"]:
        # A warning, so the CLI shows it (stderr) without any logging set up: the user should know.
        log.warning("%s: %d reference answer(s) published as a number (read as text), %d missing (graded "
                    "without one); %d record(s) have no checklist", path, odd["numeric_reference"],
                    odd["missing_reference"], odd["missing_checklist"])
    return questions


def odd_records(questions: Sequence[Question]) -> dict[str, int]:
    """How many records were loaded with a numeric or missing reference answer, or no checklist."""
    return {
        "numeric_reference": sum(1 for q in questions if q.meta.get("reference_numeric")),
        "missing_reference": sum(1 for q in questions if q.meta.get("reference_missing")),
        "missing_checklist": sum(1 for q in questions if q.meta.get("checklist_missing")),
    }
