"""ScholarQA-CS (ScholarQABench): research questions with annotator-written weighted criteria.

Record: {initial_prompt, case_id, annotator, agreement,
         metric_config: {name, config: {question, other_properties: [{name, criterion, weight, evidence}], ...}}}.

Ids are the `case_id`s: the file has 110 cases for 100 distinct questions (some questions were annotated
twice, with different criteria), so the question text is not unique. `meta["question_key"]` (a hash of
the question text) groups the cases of one question, so a split can keep them together.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ...domain import GoldItem, GoldRubric, Question, Turn
from ...errors import DatasetError
from ..common import build, field_name, need_list, need_object, need_points, need_text, read_json, ref, unique

# The official config also weighs length, expertise, citations and excerpts (kept in meta); the README's
# rule scores only the annotated criteria, which is what our grader does.
_SIDE_WEIGHTS = ("length_weight", "expertise_weight", "citations_weight", "excerpts_weight")


def question_key(text: str) -> str:
    return hashlib.sha256(" ".join(text.split()).encode("utf-8")).hexdigest()[:16]


def load_scholarqa_cs(path: Path | str) -> list[Question]:
    path = Path(path)
    data = read_json(path)
    if not isinstance(data, list):
        raise DatasetError(path, None, None, "must be a JSON list of cases")
    out = []
    for i, raw in enumerate(data):
        where = ref(i)
        obj = need_object(path, None, where, raw)
        case_id = need_text(path, None, where, obj, "case_id")
        prompt = need_text(path, None, where, obj, "initial_prompt")
        mc = need_object(path, None, where, obj.get("metric_config"), "metric_config")
        config = need_object(path, None, field_name(where, "metric_config"), mc.get("config"), "config")
        cwhere = field_name(where, "metric_config.config")
        items = []
        for j, prop in enumerate(need_list(path, None, cwhere, config, "other_properties")):
            pwhere = field_name(cwhere, f"other_properties[{j}]")
            prop = need_object(path, None, pwhere, prop)
            criterion = need_text(path, None, pwhere, prop, "criterion")
            weight = prop.get("weight")
            points = need_points(path, None, field_name(pwhere, "weight"), weight, positive=True)
            evidence = prop.get("evidence", [])
            if not isinstance(evidence, list) or not all(isinstance(e, str) for e in evidence):
                raise DatasetError(path, None, field_name(pwhere, "evidence"), "must be a list of strings")
            name = str(prop.get("name", f"item_{j}"))
            kind = "nice_to_have" if name.startswith("nice_to_have") else "most_important"
            items.append(GoldItem(text=criterion, points=points, tags=(kind,),
                                  extra={"name": name, "evidence": evidence}))
        meta = {"case_id": case_id, "question_key": question_key(prompt), "annotator": obj.get("annotator"),
                "agreement": obj.get("agreement"), "metric_name": mc.get("name"),
                "side_weights": {k: config[k] for k in _SIDE_WEIGHTS if k in config}}
        out.append((None, where, build(path, None, where, id=case_id, task="scholarqa_cs",
                                       turns=(Turn(role="user", content=prompt),),
                                       gold=GoldRubric(scheme="scholarqa_cs", items=tuple(items)), meta=meta)))
    return unique(path, out)
