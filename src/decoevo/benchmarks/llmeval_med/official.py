"""LLMEval-Med graded with its official prompts (llmeval/LLMEval-Med `evaluate/Evaluate.py`: one prompt per
category, and the system message it sends), verbatim.

Facts of the official judge followed here: the prompt of the question's category, filled as its f-string
fills it: the question of this round only (earlier rounds are not shown), the answer, the reference answer
and the checklist as printed (a number as Python prints it, a missing one as "nan"); the system message,
then the prompt as the user message; no sampling parameters, so the API's default temperature (1.0,
sent explicitly here). The score is the first bracketed integer in the reply as the server sent it
(`[4]`), a leading `<think>` block included: Evaluate.py searches the whole message content, so a
reasoning model's `[2]` while thinking is the score, not the `[5]` after it; a reply
without one, or with one outside 1-5, is unscored. Upstream asks once and keeps that first reply
(Evaluate.py stores -1 or "" and Aggregate.py counts the answer as not usable), so this grader asks once
too and never asks again: a re-ask would turn an upstream "not usable" into a usable answer, and would pay
for calls the official pipeline never makes. Usable: a score of 4 or more.
"""

from __future__ import annotations

import re
from dataclasses import replace

from ...domain import Question
from ...grading.base import role_name
from ...grading.official import ask_text, fill
from ...grading.result import GradeResult, ItemGrade, conclude
from ...lm import LM, GenParams, LMError, Message
from ...lm.errors import ConfigError
from ..record import OfficialPrompts, TemplateSource
from .grader import ITEM, POLICY, SCHEME, _compute

_COMMIT = "508516fafd288c896691442d657b4af619609535"
_URL = f"https://raw.githubusercontent.com/llmeval/LLMEval-Med/{_COMMIT}/evaluate/Evaluate.py"
_SHA = "3d5a3165940a5476ec56ef2989d570a3edec21414f23d5677f005bc3890002c9"
CATEGORIES = ("医疗知识", "医疗语言理解", "医疗推理", "医疗安全伦理", "医疗文本生成")
_WITH_CHECKLIST = {"医疗知识", "医疗语言理解", "医疗文本生成"}  # the other two prompts show no checklist
PROMPTS: tuple[TemplateSource, ...] = (
    TemplateSource(
        "system",
        _URL,
        _SHA,
        "python_system",
        "getresponse",
        (),
        f"llmeval/LLMEval-Med@{_COMMIT[:7]} evaluate/Evaluate.py, the system message",
    ),
    *(
        TemplateSource(
            c,
            _URL,
            _SHA,
            "python_function",
            f"getresponse.prompt_{c}",
            ("<<Question>>", "<<Response>>", "<<Sanswer>>", *(("<<checklist>>",) if c in _WITH_CHECKLIST else ())),
            f"llmeval/LLMEval-Med@{_COMMIT[:7]} evaluate/Evaluate.py, prompt_{c}",
        )
        for c in CATEGORIES
    ),
)
PARAMS = GenParams(temperature=1.0, max_tokens=1024, whole_content=True)
_SCORE = re.compile(r"\[(\d+)\]")


def parse_score(text: str) -> int:
    match = _SCORE.search(text)
    if match is None:
        raise ValueError("no bracketed score")
    score = int(match.group(1))
    if not 1 <= score <= 5:
        raise ValueError(f"score {score} outside 1-5")
    return score


def judge_prompt(prompts: OfficialPrompts, question: Question, response: str) -> str:
    category = question.meta.get("category_key")
    if category not in CATEGORIES:
        raise ConfigError(f"question {question.id}: category {category!r} has no official LLMEval-Med prompt")
    fields = {
        "Question": question.turns[-1].content,
        "Response": response,
        "Sanswer": str(question.meta.get("official_sanswer", "nan")),
        "checklist": str(question.meta.get("official_checklist", "nan")),
    }
    return fill(prompts[category], fields)


async def grade_llmeval_med_official(
    lm: LM, question: Question, response: str, prompts: OfficialPrompts, *, params: GenParams | None = None
) -> GradeResult:
    messages = [Message("system", prompts["system"]), Message("user", judge_prompt(prompts, question, response))]
    # the first reply is the official one: no re-ask (see the module docstring)
    sent = replace(params or PARAMS, whole_content=True)  # upstream reads the content whole, reasoning and all
    out = await ask_text(lm, messages, parse_score, role=role_name(SCHEME), params=sent, retries=0)
    item = (
        ItemGrade.failed(0, ITEM, 1.0, out)
        if isinstance(out, LMError)
        else ItemGrade(index=0, criterion=ITEM, value=float(out))
    )
    result = conclude(question.id, SCHEME, [item], POLICY, _compute)
    marks = {
        "category": question.meta.get("category_key", "?"),
        "reference_missing": bool(question.meta.get("reference_missing")),
        "checklist_missing": bool(question.meta.get("checklist_missing")),
    }
    return result.model_copy(update={"details": {**result.details, **marks}})
