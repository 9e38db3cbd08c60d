"""`decoevo compare`: the initial and the shipped solver skill answer the same questions, each answer is graded
by the gold grader, and the two are paired per question: is the shipped skill better than the user's own, and
where? Every call goes through the run's cache, so a question `decoevo eval` already answered and graded
with either skill costs nothing here."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..analysis.stats import graded_in_both, paired_difference
from ..domain import Question, Skill
from ..grading import role_name
from ..rundir.evalfiles import compare_stem, slug
from ..rundir.records import EVAL_DIR, CompareFile
from .evaluate import EvalTarget
from .independence import independence
from .session import EvalSession, GradedResponse


def question_text(question: Question) -> str:
    """What the user asked: the last user turn (a multi-turn question's earlier turns are context)."""
    users = [t.content for t in question.turns if t.role == "user"]
    return users[-1] if users else question.turns[-1].content


def changed_criteria(before: GradedResponse, after: GradedResponse) -> list[dict[str, Any]]:
    """The gold criteria scored differently under the two skills (same rubric, so the same indices), with
    both values on the benchmark's scale (None: the grader could not score it)."""
    after_items = {i.index: i for i in after.grade.items}
    out = []
    for b in before.grade.items:
        a = after_items.get(b.index)
        if a is not None and a.value != b.value:
            out.append({"index": b.index, "criterion": b.criterion, "points": b.points, "before": b.value,
                        "after": a.value})
    return out


def _side(graded: GradedResponse) -> dict[str, Any]:
    return {"response": graded.response, "score": graded.grade.score, "grade": graded.grade.model_dump()}


def compare_rows(pairs: list[tuple[Question, GradedResponse, GradedResponse]]) -> list[dict[str, Any]]:
    rows = []
    for q, before, after in pairs:
        b, a = before.grade.score, after.grade.score
        rows.append({"question_id": q.id, "question": question_text(q), "before": _side(before),
                     "after": _side(after), "delta": None if a is None or b is None else a - b,
                     "changed": changed_criteria(before, after)})
    return rows


def paired_summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Both skills' mean over the questions graded under both, and after − before with a paired t-based
    95% interval over those questions (a question ungraded under either skill counts for neither)."""
    before = {r["question_id"]: r["before"]["score"] for r in rows}
    after = {r["question_id"]: r["after"]["score"] for r in rows}
    both = sorted(graded_in_both(after, before))
    out: dict[str, Any] = {"n_questions": len(rows), "n_paired": len(both), "before_score": None,
                           "after_score": None, "mean_delta": None, "ci_low": None, "ci_high": None,
                           "p_value": None, "note": None}
    if not both:
        return {**out, "note": "no question was graded under both skills"}
    ci = paired_difference({k: after[k] for k in both}, {k: before[k] for k in both})
    return {**out, "before_score": sum(before[k] for k in both) / len(both),
            "after_score": sum(after[k] for k in both) / len(both), "mean_delta": ci.mean_diff,
            "ci_low": ci.ci_low, "ci_high": ci.ci_high, "p_value": ci.p_value, "note": ci.reason}


@dataclass(frozen=True)
class SkillFile:
    """A solver skill from a file (`compare --skill FILE`): an edited prompt set against the run's."""

    path: str  # as the user gave it
    text: str

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode("utf-8", "surrogatepass")).hexdigest()

    def skill(self) -> Skill:
        return Skill(kind="solver", version=0, text=self.text, reason=f"from {self.path}")

    def record(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256}

    def slug(self) -> str:
        """The file's part of the comparison's file name: its stem and a hash of its text (another edit of
        the same file is another comparison, never a replacement)."""
        return f"{slug(Path(self.path).stem, 32)}-{self.sha256[:8]}"


async def compare(session: EvalSession, target: EvalTarget, *, before: int | None = 0, after: int | None = None,
                  after_file: SkillFile | None = None,
                  on_item: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Grade solver version `before` (the initial one; None: the shipped one) and `after` (the shipped one
    unless given, or the skill in `after_file`) on `target`'s questions; write
    RUN/eval/compare-<name>-v<A>-v<B>-<grader>.json (…-v<A>-<file>-<grader>.json for a file) and return its
    record, with `file` (where it was written). Gradings under eval/ are never touched."""
    view = session.view
    first = view.final("solver") if before is None else view.skill("solver", before)
    second = view.final("solver") if after is None else view.skill("solver", after)
    if after_file is not None:
        # the file as `export -o` wrote it (stripped) is the run's skill itself: answer with its exact text, so
        # an unchanged prompt gets the very answers (and cache entries) of the run's skill
        second = first if after_file.text == first.text.strip() else after_file.skill()
    questions = target.questions(session)
    official = session.official(questions[0]) if questions else None  # refuses an unfetched "official" up front

    async def one(q: Question) -> tuple[Question, GradedResponse, GradedResponse]:
        a = await session.solve_and_grade(q, first)
        b = await session.solve_and_grade(q, second)
        if on_item is not None:
            on_item(q.id)
        return q, a, b

    pairs = await session.gather(one, questions)
    rows = compare_rows(pairs)
    scheme = questions[0].gold.scheme if questions and questions[0].gold is not None else "none"
    grader = independence(view.config.lm, session.lm_config, role_name(scheme))
    record: dict[str, Any] = {
        "name": target.name,
        "kind": "transfer" if target.data is not None else "test",
        "benchmark": scheme,
        "data": target.data.path if target.data is not None else view.config.data.path,
        "split": None if target.data is not None else target.split,
        "method": view.method,
        "seed": view.seed,
        "run_id": view.run_id,
        "before_version": first.version,
        "after_version": None if after_file is not None else second.version,
        "after_skill": after_file.record() if after_file is not None else None,
        "after_same_as_before": after_file is not None and second is first,
        "grader_model": grader.grader_model,
        "self_graded": grader.self_graded,
        "self_graded_roles": sorted(grader.roles),
        "grader_independence": grader.label,
        "grader_prompt": "official" if official is not None else "ours",
        **paired_summary(rows),
        "rows": rows,
    }
    stem = compare_stem(target.name, first.version, after_file.slug() if after_file is not None else second.version,
                        grader.grader_model, record["grader_prompt"])
    session.save(stem, record, CompareFile)
    return {**record, "file": f"{EVAL_DIR}/{stem}.json"}
