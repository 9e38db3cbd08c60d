"""WritingBench graded with its official prompts (X-PLUG/WritingBench `prompt.py`: `evaluate_system` and
`evaluate_prompt`), verbatim.

Facts of the official evaluator followed here: one request per checklist criterion, the system prompt then
the user prompt filled with Python's str.format: the query, the response (any reasoning before a
"</think>" line and the blank line after it cut away) and the criterion as the Python text of the
published checklist entry (`str(dict)`); sampled at the evaluators' defaults (temperature 1.0, at most
2048 tokens; their top_p 0.95 is not sent: decoevo's requests do not carry top_p). The reply is read
after stripping the characters `json|` and backticks from both ends, and accepted when it is a JSON
object with an integer score from 1 to 10 and a string reason. The query's score is the mean of its
criteria (every criterion needed, as upstream, where a criterion that never parses stops the run).
"""

from __future__ import annotations

import json

from ...aio import gather_all
from ...domain import GoldItem, Question
from ...grading.base import gold_items, role_name
from ...grading.official import ask_text
from ...grading.result import GradeResult, ItemGrade, UnknownPolicy, conclude
from ...lm import LM, GenParams, LMError, Message
from ..record import OfficialPrompts, TemplateSource
from .grader import SCHEME, _compute

_COMMIT = "ae2d5176449b7b769815482641d35926f26793eb"
_URL = f"https://raw.githubusercontent.com/X-PLUG/WritingBench/{_COMMIT}/prompt.py"
_SHA = "c5bf21f28d4b4e54b682236cbe815831f3e362ff9b4f3e8c7c10467c491ecad1"
PROMPTS: tuple[TemplateSource, ...] = (
    TemplateSource(
        "system",
        _URL,
        _SHA,
        "python_string",
        "evaluate_system",
        (),
        f"X-PLUG/WritingBench@{_COMMIT[:7]} prompt.py, evaluate_system",
    ),
    TemplateSource(
        "grader",
        _URL,
        _SHA,
        "python_string",
        "evaluate_prompt",
        ("{criteria}", "{query}", "{response}"),
        f"X-PLUG/WritingBench@{_COMMIT[:7]} prompt.py, evaluate_prompt",
    ),
)
PARAMS = GenParams(temperature=1.0, max_tokens=2048)
POLICY = UnknownPolicy(min_coverage=None)
THINK_END = "</think>\n\n"


def visible_response(response: str) -> str:
    """The official `process_gen_field`: the text after the first "</think>" and blank line, if any."""
    at = response.find(THINK_END)
    return response[at + len(THINK_END) :] if at != -1 else response


def parse_score(text: str) -> int:
    try:
        data = json.loads(text.strip("json|`"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    if not isinstance(data, dict) or "score" not in data or "reason" not in data:
        raise ValueError("needs score and reason")
    if data["score"] not in range(1, 11) or not isinstance(data["reason"], str):
        raise ValueError("score must be an integer 1-10 and reason a string")
    return int(data["score"])


def criterion_text(item: GoldItem) -> str:
    raw = item.extra.get("raw")
    return (
        str(raw)
        if isinstance(raw, dict)
        else str({"name": item.extra.get("name", ""), "criteria_description": item.extra.get("description", "")})
    )


async def grade_writingbench_official(
    lm: LM, question: Question, response: str, prompts: OfficialPrompts, *, params: GenParams | None = None
) -> GradeResult:
    items = gold_items(question, SCHEME)
    query = question.turns[-1].content

    def messages(item: GoldItem) -> list[Message]:
        user = prompts["grader"].format(query=query, response=visible_response(response), criteria=criterion_text(item))
        return [Message("system", prompts["system"]), Message("user", user)]

    outs = await gather_all(
        *[ask_text(lm, messages(it), parse_score, role=role_name(SCHEME), params=params or PARAMS) for it in items]
    )
    grades = [
        ItemGrade.failed(k, it.text, it.points, out)
        if isinstance(out, LMError)
        else ItemGrade(index=k, criterion=it.text, points=it.points, value=float(out))
        for k, (it, out) in enumerate(zip(items, outs, strict=True))
    ]
    return conclude(question.id, SCHEME, grades, POLICY, _compute)
