"""ResearchQA graded with its official prompt (realliyifei/ResearchQA `compute_coverage.py`, the string its
`build_prompt` builds), verbatim.

Facts of the official scorer followed here: the prompt is one user message (no system message) with the
response and the batch's rubric items, one per line, filled in; the model is sampled at temperature 0;
the reply is split into lines, blank lines dropped, and must have exactly one line per item, each one of
the five labels spelled exactly (Not at all, Barely, Moderately, Mostly, Completely = 1..5); a reply of
another count is asked for again (3 attempts in all), and a question with a batch that still fails is
skipped. Where the official scorer would stop on a label outside the five, this one counts the reply as
unparseable and asks again, like a wrong count.
"""

from __future__ import annotations

from ...domain import GoldItem, Question
from ...grading.base import role_name
from ...grading.official import ask_text, fill
from ...grading.result import GradeResult
from ...lm import LM, GenParams, LMError, Message
from ..record import OfficialPrompts, TemplateSource
from .grader import SCHEME, grade_batched

_COMMIT = "747a9a1330f097a0e20672240cb47e3cf02500ae"
PROMPTS: tuple[TemplateSource, ...] = (
    TemplateSource(
        "grader",
        f"https://raw.githubusercontent.com/realliyifei/ResearchQA/{_COMMIT}/compute_coverage.py",
        "a4546344837f5e3d7f686e4fd572f145e82edf84037a8e9d0c72c25ec9478b5e",
        "python_function",
        "build_prompt",
        ("<<response>>", "<<questions>>"),
        f"realliyifei/ResearchQA@{_COMMIT[:7]} compute_coverage.py, build_prompt",
    ),
)
LABELS = {"Not at all": 1, "Barely": 2, "Moderately": 3, "Mostly": 4, "Completely": 5}
PARAMS = GenParams(temperature=0.0, max_tokens=256)
ATTEMPTS = 3  # the official retry decorator's tries


def parse_labels(text: str, n: int) -> list[int]:
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    if len(lines) != n:
        raise ValueError(f"expected {n} label line(s), got {len(lines)}")
    unknown = [line for line in lines if line not in LABELS]
    if unknown:
        raise ValueError(f"not one of the five labels: {unknown[0][:60]!r}")
    return [LABELS[line] for line in lines]


async def grade_researchqa_official(
    lm: LM, question: Question, response: str, prompts: OfficialPrompts, *, params: GenParams | None = None
) -> GradeResult:
    async def judge(batch: tuple[GoldItem, ...]) -> list[int] | LMError:
        # one pass, as the f-string: an answer quoting "<<questions>>" is not filled again
        prompt = fill(prompts["grader"], {"response": response, "questions": "\n".join(it.text for it in batch)})
        return await ask_text(
            lm,
            [Message("user", prompt)],
            lambda text: parse_labels(text, len(batch)),
            role=role_name(SCHEME),
            params=params or PARAMS,
            retries=ATTEMPTS - 1,
        )

    return await grade_batched(question, judge)
