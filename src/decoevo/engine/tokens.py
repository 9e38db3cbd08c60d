"""Tokens per call of each role, for the dollars a plan prints before anything is spent.

A call's prompt is what its role builds (the role modules' own message builders, fed with material of the
expected size: the question, the skills, an answer, a rubric, the failures and audit records a rewrite
reads); its completion is what the model is expected to write, capped by the role's token limit, so a
limit far above what a model writes is not taken as what it writes. Expected lengths of what a capable
model writes are HealthBench's (answers and rubrics, measured: `decoevo.reply_lengths`) and, for
the roles with no public reference text (rationales, audits, rewrites), the lengths our prompts ask for.
Tokens are characters / 4. Once a run has paid calls, its ledger's measured tokens per call replace these
(`measured_tokens`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from ..domain import Criterion, CriterionScore, Judgement, QuestionView, Rubric, Skill, Turn
from ..lm import Message
from ..reply_lengths import ANSWER_CHARS, ASSUMED_CHARS, CRITERION_CHARS, RUBRIC_CRITERIA
from .config import Hyper

CHARS_PER_TOKEN = 4
# A question of the bundled HealthBench sample: mean characters of its text as the prompts quote it (121,
# measured on the 24 conversations of decoevo/data/healthbench_sample.jsonl); used before the data are read.
TYPICAL_QUESTION_CHARS = 121.0
JSON_FIELD_CHARS = 12  # a field's quotes, name and separators


@dataclass(frozen=True)
class CallTokens:
    prompt: float
    completion: float


def capped_mean(table: Sequence[float], cap: float | None = None, points: int = 400) -> float:
    """E[min(X, cap)] for X distributed as the percentile table describes (linear between its points)."""
    total = 0.0
    for i in range(points):
        position = (i + 0.5) / points * (len(table) - 1)
        k = min(int(position), len(table) - 2)
        x = table[k] + (table[k + 1] - table[k]) * (position - k)
        total += x if cap is None else min(x, cap)
    return total / points


def _median(field: str) -> float:
    return float(ASSUMED_CHARS.get(field, ASSUMED_CHARS["default"])[1])


def _tokens(messages: Iterable[Message]) -> float:
    return sum(len(m.content) for m in messages) / CHARS_PER_TOKEN


def _json_chars(fields: Mapping[str, float]) -> float:
    return 2 + sum(chars + len(name) + JSON_FIELD_CHARS for name, chars in fields.items())


# Text fields by name, and the assumed length (decoevo.reply_lengths.ASSUMED_CHARS) each is written at
_FIELD_KIND = {"rationale": "rationale", "why_missed": "rationale", "principle": "rationale", "repair": "rationale",
               "explanation": "rationale", "reason": "rationale", "skill": "skill", "analysis": "analysis"}
SHORT_VALUE_CHARS = 3  # a number, a level, a label


def json_reply_chars(schema: type[BaseModel]) -> float:
    """Expected characters of a reply filling `schema`: each text field as long as our prompts ask for
    (a rationale of one or two sentences, ...), numbers and labels short, a list at its least length (one
    item if it may be empty)."""
    root = schema.model_json_schema()
    defs = root.get("$defs", {})

    def size(node: Mapping[str, Any], name: str) -> float:
        if "$ref" in node:
            return size(defs[str(node["$ref"]).rsplit("/", 1)[-1]], name)
        if "anyOf" in node:
            return max(size(option, name) for option in node["anyOf"])
        kind = node.get("type")
        if kind == "object":
            return 2 + sum(size(sub, key) + len(key) + JSON_FIELD_CHARS
                           for key, sub in node.get("properties", {}).items())
        if kind == "array":
            return 2 + max(1, int(node.get("minItems", 1))) * (size(node.get("items", {}), name) + 2)
        if kind == "string" and "enum" not in node:
            return _median(_FIELD_KIND.get(name, "default"))
        return SHORT_VALUE_CHARS

    return size(root, "")


@dataclass(frozen=True)
class Lengths:
    """Expected characters of what the roles read and write, at one run's sizes."""

    question: float
    answer: float  # a solver answer, capped by its token limit
    criteria: float  # criteria per generated rubric, at most max_criteria
    criterion: float
    rationale: float
    skill: float  # a rewritten skill, capped by the rewrite's token limit
    solver_skill: float  # the solver skill a call sees: the initial one until a rewrite is accepted
    generator_skill: float


def lengths(hyper: Hyper, question_chars: float, solver_skill: str, generator_skill: str,
            initial_share: float) -> Lengths:
    """`initial_share`: the expected share of steps still under the initial solver skill."""
    answer = capped_mean(ANSWER_CHARS, hyper.max_tokens_solve * CHARS_PER_TOKEN)
    criteria = capped_mean(RUBRIC_CRITERIA, hyper.max_criteria)
    skill = min(_median("skill"), hyper.max_tokens_rewrite * CHARS_PER_TOKEN)
    return Lengths(question_chars, answer, criteria, capped_mean(CRITERION_CHARS), _median("rationale"), skill,
                   initial_share * len(solver_skill) + (1 - initial_share) * skill, float(len(generator_skill)))


def _text(chars: float) -> str:
    return "x" * max(1, round(chars))


def role_tokens(hyper: Hyper, question_chars: float = TYPICAL_QUESTION_CHARS, *, task: str = "generic",
                initial_share: float = 0.5) -> dict[str, CallTokens]:
    """Expected (prompt, completion) tokens of one call of each training role at `hyper`'s sizes."""
    from ..benchmarks.registry import structural_spec
    from ..roles import contrastive_audit, generate_rubric, judge, rewrite_generator, rewrite_solver, solve
    from ..roles import structural_audit as structural
    from ..tasks.specs import INITIAL_GENERATOR_SKILL, INITIAL_SOLVER_SKILL

    n = lengths(hyper, question_chars, INITIAL_SOLVER_SKILL, INITIAL_GENERATOR_SKILL, initial_share)
    k = max(1, round(n.criteria))
    question = QuestionView(id="q", task=task, turns=(Turn(role="user", content=_text(n.question)),))
    answer = _text(n.answer)
    rubric = Rubric(question_id="q", generator_version=0,
                    criteria=tuple(Criterion(text=_text(n.criterion), weight=3) for _ in range(k)))
    judged = Judgement(question_id="q", scores=tuple(CriterionScore(score=0.5, rationale=_text(n.rationale))
                                                     for _ in range(k)))
    solver = Skill(kind="solver", version=1, text=_text(n.solver_skill))
    generator = Skill(kind="generator", version=0, text=_text(n.generator_skill))
    failures = [rewrite_solver.Failure(question, answer, rubric, judged, 0.5)
                for _ in range(min(hyper.max_failures, hyper.batch_size))]
    record = structural.StructuralRecord(question_id="q", adequacy=0.5, rationale=_text(n.rationale),
                                         repair=_text(n.rationale), question=question.as_text(),
                                         rubric="\n".join(c.text for c in rubric.criteria))
    pairs = contrastive_audit.ContrastiveRecord(question_id="q", preferred=answer, other=answer,
                                                rationale=_text(n.rationale), principle=_text(n.rationale),
                                                question=question.as_text(), missed=_text(n.rationale))
    caps = {"solve": hyper.max_tokens_solve, "generate_rubric": hyper.max_tokens_rubric,
            "judge": hyper.max_tokens_judge, "rewrite_solver": hyper.max_tokens_rewrite,
            "rewrite_generator": hyper.max_tokens_rewrite, "structural_audit": hyper.max_tokens_audit,
            "contrastive_audit_blind": hyper.max_tokens_audit, "contrastive_audit_reveal": hyper.max_tokens_audit}
    reason = n.rationale
    written = {
        "solve": n.answer,
        "generate_rubric": 16 + k * _json_chars({"criterion": n.criterion, "weight": 1}),
        "judge": 16 + k * _json_chars({"rationale": reason, "level": 1}),
        "rewrite_solver": _json_chars({"analysis": _median("analysis"), "skill": n.skill}),
        "rewrite_generator": _json_chars({"analysis": _median("analysis"), "skill": n.skill}),
        "structural_audit": _json_chars({"rationale": reason, "repair": reason, "adequacy": 1}),
        "contrastive_audit_blind": _json_chars({"rationale": reason, "preference": 3}),
        "contrastive_audit_reveal": _json_chars({"why_missed": reason, "principle": reason}),
    }
    probe = max(1, hyper.pairs_per_question)
    prompts = {
        "solve": solve.messages(question, solver),
        "generate_rubric": generate_rubric.messages(question, generator),
        "judge": judge.joint_messages(question, answer, rubric),
        "rewrite_solver": rewrite_solver.messages(solver, failures),
        "rewrite_generator": rewrite_generator.messages(generator, [record] * probe, [pairs] * probe),
        "structural_audit": structural.messages(structural_spec(task), question, rubric),
        "contrastive_audit_blind": contrastive_audit.stage1_messages(question, answer, answer),
        "contrastive_audit_reveal": contrastive_audit.stage2_messages(question, answer, answer, _text(reason),
                                                                      rubric, judged, judged),
    }
    return {role: CallTokens(_tokens(prompts[role]), min(written[role] / CHARS_PER_TOKEN, float(caps[role])))
            for role in prompts}


def question_chars(questions: Iterable[QuestionView]) -> float:
    """Mean characters of the questions' text (what every role's prompt quotes)."""
    sizes = [len(q.as_text()) for q in questions]
    return sum(sizes) / len(sizes) if sizes else TYPICAL_QUESTION_CHARS


def measured_tokens(ledgers: Iterable[Path]) -> dict[str, CallTokens]:
    """Mean prompt and completion tokens per paid call of each role over the given ledger files (a
    previous run's: `RUN/ledger.json`, `RUN/eval/ledger-*.json`); roles with no paid call are left out,
    unreadable files skipped."""
    sums: dict[str, list[float]] = {}
    for path in ledgers:
        try:
            rows = json.loads(path.read_text(encoding="utf-8")).get("rows", [])
        except (OSError, ValueError, AttributeError):
            continue
        for row in rows:
            if not isinstance(row, dict) or not row.get("calls"):
                continue
            acc = sums.setdefault(str(row.get("role")), [0.0, 0.0, 0.0])
            acc[0] += row["calls"]
            acc[1] += row.get("prompt_tokens", 0)
            acc[2] += row.get("completion_tokens", 0)
    return {role: CallTokens(p / n, c / n) for role, (n, p, c) in sums.items() if n}
