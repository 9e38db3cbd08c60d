"""Role: structural audit. Task spec π_str + question + rubric (never a response or a score) ->
adequacy u_q ∈ [0, 1], an evidence-grounded rationale ξ_q and a repair suggestion κ_q."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..domain import QuestionView, Rubric
from ..lm import LM, GenParams, Message
from .common import UNTRUSTED_NOTE, data_block, own_verdict, question_block, render_rubric

ROLE = "structural_audit"


class StructuralOut(BaseModel):
    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    rationale: str = Field(min_length=3, description="cite the question or rubric text")
    repair: str = Field(min_length=3, description="how rubric writing should change")
    adequacy: Literal[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10] = Field(
        description="0 = rubric misses what matters, 10 = complete")


class StructuralRecord(BaseModel):
    """(q, R_q(g), u_q, ξ_q, κ_q): the question and the rubric audited travel with the finding, so the
    generator rewriter reads what was omitted next to what was there."""

    question_id: str
    adequacy: float  # u_q in [0, 1]
    rationale: str  # ξ_q: the omission or ambiguity, citing the question or rubric
    repair: str  # κ_q: how rubric writing should change
    question: str = ""
    rubric: str = ""  # the audited rubric, one numbered criterion per line


SYSTEM = f"""You audit a grading rubric before any answer exists. Using the task specification, decide \
whether the rubric covers what a good answer to this question must do: missing requirements, vague \
criteria that cannot be checked, wrong emphasis in the weights. Quote the question or rubric text your \
judgement rests on. Then suggest how the rules for writing rubrics should change so that future rubrics \
avoid the problem. Finally rate adequacy from 0 (misses what matters) to 10 (complete and checkable). \
Return JSON with the fields rationale, repair and adequacy. {UNTRUSTED_NOTE}"""


def messages(spec: str, question: QuestionView, rubric: Rubric) -> list[Message]:
    return [
        Message("system", SYSTEM),
        Message("user", f"Task specification:\n{spec}\n\n{question_block(question)}\n\n"
                        f"Rubric under audit:\n{data_block('rubric', render_rubric(rubric))}"),
    ]


async def structural_audit(
    lm: LM, spec: str, question: QuestionView, rubric: Rubric, *, params: GenParams
) -> StructuralRecord:
    out = await own_verdict(lm, messages(spec, question, rubric), StructuralOut, role=ROLE, params=params)
    return StructuralRecord(question_id=question.id, adequacy=out.adequacy / 10, rationale=out.rationale,
                            repair=out.repair, question=question.as_text(), rubric=render_rubric(rubric))
