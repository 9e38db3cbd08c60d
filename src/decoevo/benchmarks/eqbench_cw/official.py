"""EQ-Bench Creative Writing v3 graded with its official judging prompt
(EQ-bench/creative-writing-bench `data/creative_writing_judging_prompt.txt`), verbatim.

Facts of the official judge followed here: the prompt file is filled with Python's str.format: the
writing prompt as the benchmark stores it (with its <SEED> slot, not the modifier the piece was written
with), the piece, the criteria as "- name" lines in the criteria file's order, and the lower-is-better
criteria joined by ", " in the negative file's order; one user message, temperature 0, at most 1000
tokens. The reply is read with the official two patterns (`name: score`, `name: Score score` and
`name: [score]`), a score above 20 discarded; the piece score is the mean over every parsed entry with the
lower-is-better ones inverted (20 - x), times 5. A reply in which none of the benchmark's criteria can be
read is asked for again (the official runner re-queues an unscored piece), then the piece is ungraded.

The benchmark's headline is a pairwise Elo ranking against other models' pieces (the same repository's
`core/elo.py`), which needs the reference models' judged pieces and their matchups; it is not
implemented, and decoevo reports this rubric score in its place, saying so.
"""

from __future__ import annotations

import re
from typing import Any

from ...domain import Question
from ...grading.base import gold_items, role_name
from ...grading.official import ask_text
from ...grading.result import GradeResult, ItemGrade, UnknownPolicy, conclude
from ...lm import LM, GenParams, LMError, Message
from ..record import OfficialPrompts, TemplateSource
from .grader import SCHEME

_COMMIT = "e7ab00917c96aeae577e3eeea15eba882be9d5e0"
PROMPTS: tuple[TemplateSource, ...] = (
    TemplateSource(
        "judge",
        f"https://raw.githubusercontent.com/EQ-bench/creative-writing-bench/{_COMMIT}/data/"
        "creative_writing_judging_prompt.txt",
        "650da667804d81f5e2af042502a84c9cbe9d29920ab44d2e6ae05d3b42f573ac",
        "text",
        placeholders=(
            "{writing_prompt}",
            "{test_model_response}",
            "{creative_writing_criteria}",
            "{lower_is_better_criteria}",
        ),
        upstream=f"EQ-bench/creative-writing-bench@{_COMMIT[:7]} data/creative_writing_judging_prompt.txt",
    ),
)
PARAMS = GenParams(temperature=0.0, max_tokens=1000)
SCORE_MAX = 20.0
_PATTERNS = (re.compile(r"(.*?):\s*(?:Score\s+)?(-?\d+(?:\.\d+)?)"), re.compile(r"(.*?):\s*\[(-?\d+(?:\.\d+)?)\]"))
# Any parsed entry counts toward the piece score, as upstream; a criterion is found in it when present.
POLICY = UnknownPolicy(min_coverage=0.0)


def parse_scores(text: str) -> dict[str, float]:
    """The official parse: both patterns over the whole reply, later matches overriding, scores above 20
    dropped."""
    scores: dict[str, float] = {}
    for pattern in _PATTERNS:
        for name, value in pattern.findall(text):
            if float(value) <= SCORE_MAX:
                scores[name.strip()] = float(value)
    return scores


def piece_score(scores: dict[str, float], negative: set[str]) -> float | None:
    """Mean over every parsed entry (lower-is-better ones inverted), on 0-20, x5; None when empty."""
    values = [SCORE_MAX - v if name in negative else v for name, v in scores.items()]
    values = [v for v in values if v <= SCORE_MAX]
    return sum(values) / len(values) * 5 if values else None


def judge_prompt(template: str, question: Question, response: str) -> str:
    items = gold_items(question, SCHEME)
    negative = sorted((it for it in items if it.extra.get("negative")), key=lambda it: it.extra.get("negative_rank", 0))
    return template.format(
        writing_prompt=question.meta.get("writing_prompt") or question.turns[-1].content,
        test_model_response=response,
        creative_writing_criteria="\n".join("- " + it.text for it in items),
        lower_is_better_criteria=", ".join(it.text for it in negative),
    )


async def grade_eqbench_cw_official(
    lm: LM, question: Question, response: str, prompts: OfficialPrompts, *, params: GenParams | None = None
) -> GradeResult:
    items = gold_items(question, SCHEME)
    names = {it.text for it in items}

    def parse(text: str) -> dict[str, float]:
        scores = parse_scores(text)
        if not names & set(scores):
            raise ValueError("no criterion of the benchmark could be read from the reply")
        return scores

    out = await ask_text(
        lm,
        [Message("user", judge_prompt(prompts["judge"], question, response))],
        parse,
        role=role_name(SCHEME),
        params=params or PARAMS,
    )
    if isinstance(out, LMError):
        grades = [ItemGrade.failed(k, it.text, 1.0, out) for k, it in enumerate(items)]
        scores: dict[str, float] = {}
    else:
        scores = out
        grades = [ItemGrade(index=k, criterion=it.text, value=scores.get(it.text)) for k, it in enumerate(items)]
    negative = {it.text for it in items if it.extra.get("negative")}

    def compute(_: list[ItemGrade]) -> tuple[float | None, dict[str, Any]]:
        stray = sorted(set(scores) - names)
        return piece_score(scores, negative), {"parsed_entries": len(scores), "entries_not_criteria": stray[:20]}

    return conclude(question.id, SCHEME, grades, POLICY, compute)
