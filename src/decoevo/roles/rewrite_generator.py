"""Role: rewrite generator. Current generator skill + probe-set audit records -> a candidate skill of
general rubric-writing rules (distillation). It never sees solver scores or validation records."""

from __future__ import annotations

from pydantic import BaseModel, Field

from ..domain import Skill
from ..lm import LM, GenParams, Message
from .common import UNTRUSTED_NOTE, clip, data_block
from .contrastive_audit import ContrastiveRecord
from .structural_audit import StructuralRecord

ROLE = "rewrite_generator"
SKILL_MAX_CHARS = 4000


class GeneratorSkillOut(BaseModel):
    analysis: str = Field(json_schema_extra={"maxLength": 200})
    skill: str = Field(min_length=20, max_length=SKILL_MAX_CHARS)


SYSTEM = f"""You maintain the principles used to write grading rubrics for a task. Auditors reviewed \
rubrics written with the current principles: some found requirements the rubrics omitted, others found \
pairs of answers where the rubric could not tell the better one. Distil their findings into general \
principles that would fix whole classes of rubrics, not single questions. Keep principles that still \
hold, merge duplicates, drop nothing that the findings do not contradict, and stay under 300 words. \
Return JSON with the fields analysis and skill (the complete new principles). {UNTRUSTED_NOTE}"""


def render_records(structural: list[StructuralRecord], contrastive: list[ContrastiveRecord]) -> str:
    lines = []
    if structural:
        lines.append("Coverage findings:")
        lines += [f"- adequacy {r.adequacy:.1f}: {clip(r.rationale, 400)} Suggested: {clip(r.repair, 300)}"
                  for r in structural]
    if contrastive:
        lines.append("Distinctions the rubrics missed:")
        lines += [f"- {clip(r.rationale, 400)} Principle: {clip(r.principle, 300)}" for r in contrastive]
    return "\n".join(lines)


def messages(skill: Skill, structural: list[StructuralRecord], contrastive: list[ContrastiveRecord]) -> list[Message]:
    return [
        Message("system", SYSTEM),
        Message("user", f"Current principles:\n{data_block('skill', skill.text)}\n\n"
                        f"Auditors' findings:\n{data_block('findings', render_records(structural, contrastive))}\n\n"
                        "Write the improved principles."),
    ]


async def rewrite_generator(
    lm: LM, skill: Skill, structural: list[StructuralRecord], contrastive: list[ContrastiveRecord],
    *, params: GenParams,
) -> GeneratorSkillOut:
    return await lm.structured(messages(skill, structural, contrastive), GeneratorSkillOut, role=ROLE, params=params)


def append_raw_suggestions(skill: Skill, structural: list[StructuralRecord],
                           contrastive: list[ContrastiveRecord]) -> str:
    """The no-distillation ablation: per-example suggestions appended verbatim, no rewriter call."""
    notes = [r.repair for r in structural] + [r.principle for r in contrastive if r.principle]
    return skill.text.rstrip() + "\n" + "\n".join(f"- {n.strip()}" for n in notes if n.strip())
