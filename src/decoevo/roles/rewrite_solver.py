"""Role: rewrite solver. Current skill + selected failures -> one consolidated new skill."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from ..domain import Judgement, QuestionView, Rubric, Skill
from ..lm import LM, GenParams, Message
from .common import UNTRUSTED_NOTE, Rewritten, clip, data_block, rewrite_call

ROLE = "rewrite_solver"
SKILL_MAX_CHARS = 4000


@dataclass(frozen=True)
class Failure:
    """One scored response with the criteria it missed (score < 1) and the judge's reasons."""

    question: QuestionView
    response: str
    rubric: Rubric
    judgement: Judgement
    score: float

    def missed(self) -> list[str]:
        return [
            f"- {c.text} (weight {c.weight:g}, scored {s.score:.2f}): {s.rationale}"
            for c, s in zip(self.rubric.criteria, self.judgement.scores, strict=True) if s.score < 1.0
        ]


class SkillOut(BaseModel):
    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    analysis: str = Field(description="recurring causes behind the failures")
    skill: str = Field(min_length=20, max_length=SKILL_MAX_CHARS)


SYSTEM = f"""You improve a strategy document that an assistant follows when answering users. You get the \
current strategy and answers that fell short of their grading criteria, with the grader's reasons. Find \
the causes that recur across questions and rewrite the whole strategy so that it prevents them. Write \
general, reusable rules, not fixes for one question; keep rules that still help, merge overlapping ones, \
and stay under 300 words. In the analysis, name the recurring causes; if you removed rules, say which and \
why. Return JSON with the fields analysis and skill (the complete new strategy). {UNTRUSTED_NOTE}"""


def render_failures(failures: list[Failure], extra_notes: list[str] | None = None) -> str:
    parts = []
    for i, f in enumerate(failures, 1):
        missed = "\n".join(f.missed())
        parts.append(
            f"Case {i} (score {f.score:.2f})\n{data_block('question', clip(f.question.as_text(), 1500))}\n"
            f"{data_block('response', clip(f.response, 1500))}\n"
            f"Missed criteria, with the grader's reasons:\n{data_block('findings', missed)}"
        )
    if extra_notes:  # Direct Audit: the outer round's records, for this rewrite only
        parts.append("Audit findings:\n" + data_block("findings", "\n\n".join(extra_notes)))
    return "\n\n".join(parts)


def messages(skill: Skill, failures: list[Failure], extra_notes: list[str] | None = None) -> list[Message]:
    return [
        Message("system", SYSTEM),
        Message("user", f"Current strategy:\n{data_block('skill', skill.text)}\n\n"
                        f"{render_failures(failures, extra_notes)}\n\nWrite the improved strategy."),
    ]


async def rewrite_solver(
    lm: LM, skill: Skill, failures: list[Failure], *, params: GenParams, extra_notes: list[str] | None = None
) -> Rewritten:
    return await rewrite_call(lm, messages(skill, failures, extra_notes), SkillOut, role=ROLE, params=params)
