"""Role: rewrite generator. Current generator skill + probe-set audit records -> a candidate skill of
general rubric-writing rules (distillation). It never sees solver scores or validation records.

The rewriter reads the records themselves, as the paper's tuples: each structural record with its
question, the rubric audited, the omission found (ξ) and the repair (κ); each contrastive record with
its question, the preferred and the other response (r+, r−), the blind reason, the distinction the
rubric missed and the principle (κ). Every field is clipped and the whole is bounded, so a large probe
set cannot overflow the context window.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from ..domain import Skill
from ..lm import LM, GenParams, Message
from .common import UNTRUSTED_NOTE, Rewritten, clip, data_block, rewrite_call
from .contrastive_audit import ContrastiveRecord
from .structural_audit import StructuralRecord

ROLE = "rewrite_generator"
SKILL_MAX_CHARS = 4000
FINDINGS_MAX_CHARS = 12000  # all records together; beyond it records are left out and counted


class GeneratorSkillOut(BaseModel):
    model_config = ConfigDict(defer_build=True)  # its validator is built at first use, not at import

    analysis: str
    skill: str = Field(min_length=20, max_length=SKILL_MAX_CHARS)


SYSTEM = f"""You maintain the principles used to write grading rubrics for a task. Auditors reviewed \
rubrics written with the current principles. Structural records show a question, the rubric written for \
it, a requirement the rubric omitted or left unclear, and a suggested repair. Contrastive records show a \
question and two answers the rubric scored almost the same, the answer an auditor preferred without \
seeing the rubric and why, what the rubric missed, and a principle that would catch it. Distil these \
findings into general principles that would fix whole classes of rubrics, not single questions. Keep \
principles that still hold, merge duplicates, drop nothing that the findings do not contradict, and stay \
under 300 words. In the analysis, say what you changed and why; if you removed principles, say which and \
why. Return JSON with the fields analysis and skill (the complete new principles). {UNTRUSTED_NOTE}"""


def structural_entry(r: StructuralRecord) -> str:
    return (f"Structural record, adequacy {r.adequacy:.1f}\n"
            f"Question: {clip(r.question or r.question_id, 600)}\n"
            f"Rubric audited:\n{clip(r.rubric, 900) or '(not recorded)'}\n"
            f"Omitted or unclear: {clip(r.rationale, 400)}\n"
            f"Suggested repair: {clip(r.repair, 300)}")


def contrastive_entry(r: ContrastiveRecord) -> str:
    return (f"Contrastive record\n"
            f"Question: {clip(r.question or r.question_id, 600)}\n"
            f"Preferred answer (r+): {clip(r.preferred, 700)}\n"
            f"Other answer (r-): {clip(r.other, 700)}\n"
            f"Why preferred, judged without the rubric: {clip(r.rationale, 400)}\n"
            f"What the rubric missed: {clip(r.missed, 300) or '(not recorded)'}\n"
            f"Principle: {clip(r.principle, 300)}")


def record_entries(structural: list[StructuralRecord], contrastive: list[ContrastiveRecord],
                   max_chars: int = FINDINGS_MAX_CHARS) -> list[str]:
    """The rendered records, bounded: the least adequate rubrics first, the two kinds interleaved so both
    survive the bound; a last entry counts the records left out."""
    ranked = sorted(structural, key=lambda r: r.adequacy)
    queue = [structural_entry(r) for r in ranked], [contrastive_entry(r) for r in contrastive]
    interleaved = [e for pair in zip(*queue, strict=False) for e in pair]
    n = min(len(queue[0]), len(queue[1]))
    interleaved += queue[0][n:] + queue[1][n:]
    out: list[str] = []
    used = 0
    for entry in interleaved:
        if out and used + len(entry) > max_chars:
            break
        out.append(entry)
        used += len(entry)
    if len(out) < len(interleaved):
        out.append(f"({len(interleaved) - len(out)} more records left out for length)")
    return out


def render_records(structural: list[StructuralRecord], contrastive: list[ContrastiveRecord]) -> str:
    return "\n\n".join(record_entries(structural, contrastive))


def messages(skill: Skill, structural: list[StructuralRecord], contrastive: list[ContrastiveRecord]) -> list[Message]:
    return [
        Message("system", SYSTEM),
        Message("user", f"Current principles:\n{data_block('skill', skill.text)}\n\n"
                        f"Audit records:\n{data_block('findings', render_records(structural, contrastive))}\n\n"
                        "Write the improved principles."),
    ]


async def rewrite_generator(
    lm: LM, skill: Skill, structural: list[StructuralRecord], contrastive: list[ContrastiveRecord],
    *, params: GenParams,
) -> Rewritten:
    return await rewrite_call(lm, messages(skill, structural, contrastive), GeneratorSkillOut, role=ROLE,
                              params=params)


def append_raw_suggestions(skill: Skill, structural: list[StructuralRecord],
                           contrastive: list[ContrastiveRecord]) -> str:
    """The no-distillation ablation: per-example suggestions appended verbatim, no rewriter call."""
    notes = [r.repair for r in structural] + [r.principle for r in contrastive if r.principle]
    return skill.text.rstrip() + "\n" + "\n".join(f"- {n.strip()}" for n in notes if n.strip())
