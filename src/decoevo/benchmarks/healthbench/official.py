"""HealthBench graded with its official prompt (openai/simple-evals `healthbench_eval.py`), verbatim.

Facts of the official scorer followed here: one request per rubric item, the prompt as a single user
message after the grader sampler's system message; the conversation written as `role: content` turns
joined by blank lines, the graded reply appended as the last assistant turn; the item written as
`[points] criterion`; the reply parsed as JSON after removing a ```json fence, and accepted only when
`criteria_met` is a boolean; the grader sampled with the sampler's defaults (temperature 0.5, at most
2048 tokens). The prompts themselves are read from the fetched upstream files (benchmarks/templates.py).
"""

from __future__ import annotations

import json
import re

from ...aio import gather_all
from ...domain import OPEN_TURN_TEXT, Question
from ...grading.base import gold_items, role_name
from ...grading.official import ask_text
from ...grading.result import GradeResult, ItemGrade, conclude
from ...lm import LM, GenParams, LMError, Message
from ..record import OfficialPrompts, TemplateSource
from .grader import POLICY, SCHEME, _compute

_COMMIT = "ee3b0318d8d1d9d72755a4120879be65f7c07e9e"
_RAW = f"https://raw.githubusercontent.com/openai/simple-evals/{_COMMIT}"

PROMPTS: tuple[TemplateSource, ...] = (
    TemplateSource(
        "grader",
        f"{_RAW}/healthbench_eval.py",
        "89909957f005762edaded2f0e39fc9b3b242edd55e3ac0ce4c8dd886ac59d167",
        "python_string",
        "GRADER_TEMPLATE",
        ("<<conversation>>", "<<rubric_item>>"),
        f"openai/simple-evals@{_COMMIT[:7]} healthbench_eval.py, GRADER_TEMPLATE",
    ),
    TemplateSource(
        "system",
        f"{_RAW}/sampler/chat_completion_sampler.py",
        "d9d7568ad5b04379342b7f269a6028c6945c518bc8baa56969aad035afc8d435",
        "python_string",
        "OPENAI_SYSTEM_MESSAGE_API",
        (),
        f"openai/simple-evals@{_COMMIT[:7]} sampler/chat_completion_sampler.py, OPENAI_SYSTEM_MESSAGE_API",
    ),
)
PARAMS = GenParams(temperature=0.5, max_tokens=2048)
_FENCE = re.compile(r"^```json\s*|\s*```$")


def points_text(points: float) -> str:
    """`str()` of the points as the data file holds them (integers in every official file)."""
    return str(int(points)) if float(points).is_integer() else str(points)


def conversation_text(question: Question, response: str) -> str:
    turns = [(t.role, OPEN_TURN_TEXT if t.is_open else t.content) for t in question.turns] + [("assistant", response)]
    return "\n\n".join(f"{role}: {content}" for role, content in turns)


def parse_verdict(text: str) -> bool:
    """The official parse: strip a ```json fence, load JSON, require a boolean `criteria_met`."""
    try:
        data = json.loads(_FENCE.sub("", text.strip()))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    label = data.get("criteria_met") if isinstance(data, dict) else None
    if label is True or label is False:
        return label
    raise ValueError("no boolean criteria_met")


async def grade_healthbench_official(
    lm: LM, question: Question, response: str, prompts: OfficialPrompts, *, params: GenParams | None = None
) -> GradeResult:
    items = gold_items(question, SCHEME)
    convo = conversation_text(question, response)

    def messages(text: str, points: float) -> list[Message]:
        prompt = (
            prompts["grader"]
            .replace("<<conversation>>", convo)
            .replace("<<rubric_item>>", f"[{points_text(points)}] {text}")
        )
        return [Message("system", prompts["system"]), Message("user", prompt)]

    outs = await gather_all(
        *[
            ask_text(lm, messages(it.text, it.points), parse_verdict, role=role_name(SCHEME), params=params or PARAMS)
            for it in items
        ]
    )
    grades = [
        ItemGrade.failed(k, it.text, it.points, out)
        if isinstance(out, LMError)
        else ItemGrade(index=k, criterion=it.text, points=it.points, value=1.0 if out else 0.0)
        for k, (it, out) in enumerate(zip(items, outs, strict=True))
    ]
    return conclude(question.id, SCHEME, grades, POLICY, _compute)
