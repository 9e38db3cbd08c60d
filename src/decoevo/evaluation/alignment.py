"""Rubric alignment (paper Table 5): criterion-level precision, recall and F1 of a run's final
generated rubrics against the gold rubrics, macro-averaged over questions (docs/evaluation-files.md
states the definition as formulae).

For one question, the matcher gives each generated criterion g the set M(g) of gold criteria it states:
none, one or several (a criterion asking for two things covers both). Precision is the share of
generated criteria that state at least one gold criterion; recall is the share of gold criteria stated
by at least one generated criterion; F1 is their harmonic mean (0 when both are 0). Each is averaged over
questions. A question whose matching failed is left out and counted, never scored as no overlap."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any

from ..aio import gather_all
from ..domain import Question
from ..lm import LMError
from ..rundir.records import AlignmentFile
from .independence import independence
from .matcher import match_criterion
from .models import MATCHER_ROLE, model_label
from .session import EvalSession


@dataclass(frozen=True)
class Overlap:
    precision: float
    recall: float
    f1: float


def overlap(n_gold: int, covers: Sequence[Collection[int]]) -> Overlap:
    """P/R/F1 of one question: `covers[i]` is the set of gold indices (0..n_gold-1) generated criterion i
    states. P = |{i: covers[i] non-empty}| / m, R = |union of covers| / n_gold, F1 = 2PR / (P + R)."""
    if not covers or n_gold < 1:
        raise ValueError("both rubrics need at least one criterion")
    covered: set[int] = set()
    for c in covers:
        if any(not 0 <= k < n_gold for k in c):
            raise ValueError(f"a gold index outside 0..{n_gold - 1}: {sorted(c)}")
        covered |= set(c)
    precision = sum(1 for c in covers if c) / len(covers)
    recall = len(covered) / n_gold
    f1 = 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)
    return Overlap(precision, recall, f1)


def macro(values: list[Overlap]) -> Overlap | None:
    if not values:
        return None
    n = len(values)
    return Overlap(sum(v.precision for v in values) / n, sum(v.recall for v in values) / n,
                   sum(v.f1 for v in values) / n)


async def align_question(session: EvalSession, question: Question, generator_version: int) -> dict[str, Any]:
    assert question.gold is not None
    gold = question.gold.items
    record: dict[str, Any] = {"question_id": question.id, "gold": [g.text for g in gold]}
    try:
        generator = session.view.skill("generator", generator_version)
        rubric = await session.ctx.rubric(question.view(), generator)
        generated = [c.text for c in rubric.criteria]
        record["generated"] = generated
        found = await gather_all(*[match_criterion(session.lm, question.view(), c, gold) for c in generated])
    except LMError as exc:
        return {**record, "error": f"{exc.role or 'matcher'} failed ({exc.category}): {str(exc)[:200]}"}
    matches = sorted((g, k) for g, ks in enumerate(found) for k in ks)
    o = overlap(len(gold), found)
    return {**record, "matches": matches, "precision": o.precision, "recall": o.recall, "f1": o.f1}


async def alignment(session: EvalSession, *, split: str = "test",
                    generator_version: int | None = None) -> dict[str, Any]:
    """Match the final (or a given) generator's rubrics on `split`; write and return RUN/eval/alignment.json."""
    view = session.view
    version = view.final("generator").version if generator_version is None else generator_version
    questions = [q for q in view.split(split) if q.gold is not None and q.gold.items]
    per_question = await session.gather(lambda q: align_question(session, q, version), questions)
    ok = [Overlap(r["precision"], r["recall"], r["f1"]) for r in per_question if "error" not in r]
    avg = macro(ok)
    record = {
        "method": view.method, "seed": view.seed, "split": split, "generator_version": version,
        "matcher_model": model_label(session.lm_config, [MATCHER_ROLE]),
        # the paper's matcher is excluded from optimization; one that played a run role is labelled
        "matcher_self_graded": independence(view.config.lm, session.lm_config, MATCHER_ROLE).self_graded,
        "precision": avg.precision if avg else None, "recall": avg.recall if avg else None,
        "f1": avg.f1 if avg else None,
        "n_questions": len(ok), "n_failed": len(per_question) - len(ok), "per_question": per_question,
    }
    session.save("alignment", record, AlignmentFile)
    return record
