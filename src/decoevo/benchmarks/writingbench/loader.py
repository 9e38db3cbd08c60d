"""WritingBench: one query per line with a checklist of (usually 5) criteria scored 1-10.

Record: {index, domain1, domain2, lang, query, checklist: [{name, criteria_description, "1-2", ..., "9-10"}]}.
Each criterion becomes a GoldItem "name: description"; the score-band descriptions go to `extra["bands"]`
because the grader shows them to the grading model.
"""

from __future__ import annotations

from pathlib import Path

from ...domain import GoldItem, GoldRubric, Question, Turn
from ...errors import DatasetError
from ..common import build, iter_jsonl, need, need_list, need_text, unique

BANDS = ("1-2", "3-4", "5-6", "7-8", "9-10")


def load_writingbench(path: Path | str) -> list[Question]:
    path = Path(path)
    out = []
    for n, obj in iter_jsonl(path):
        index = need(path, n, None, obj, "index")
        if not isinstance(index, int | str) or isinstance(index, bool) or str(index).strip() == "":
            raise DatasetError(path, n, "index", "must be an integer or a non-empty string")
        query = need_text(path, n, None, obj, "query")
        items = []
        for i, crit in enumerate(need_list(path, n, None, obj, "checklist")):
            where = f"checklist[{i}]"
            if not isinstance(crit, dict):
                raise DatasetError(path, n, where, "must be a JSON object with name and criteria_description")
            name = need_text(path, n, where, crit, "name")
            desc = need_text(path, n, where, crit, "criteria_description")
            bands = {b: crit[b] for b in BANDS if isinstance(crit.get(b), str)}
            items.append(GoldItem(text=f"{name}: {desc}", points=1.0,
                                  # raw: the checklist entry as published, which the official judge is shown
                                  extra={"name": name, "description": desc, "bands": bands, "raw": crit}))
        meta = {k: obj[k] for k in ("domain1", "domain2", "lang") if k in obj}
        out.append((n, None, build(path, n, None, id=str(index), task="writingbench",
                                   turns=(Turn(role="user", content=query),),
                                   gold=GoldRubric(scheme="writingbench", items=tuple(items)), meta=meta)))
    return unique(path, out)
