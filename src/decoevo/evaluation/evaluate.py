"""`decoevo eval`: apply a run's solver skill to held-out questions and grade the replies with the
benchmark's official rule. The test split of the run itself, or another benchmark for within-domain
transfer (HealthBench -> LLMEval-Med, WritingBench -> EQ-Bench), with no further updates."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..benchmarks import aggregate, find
from ..domain import Question
from ..engine.config import DataConfig
from ..grading import role_name
from ..lm.errors import ConfigError
from ..rundir.evalfiles import result_stem
from ..rundir.records import EVAL_DIR, EvalFile
from ..tasks.load import load_questions
from .independence import independence
from .models import model_label
from .session import EvalSession, GradedResponse


@dataclass(frozen=True)
class EvalTarget:
    """What to evaluate on: a split of the run, or every question of another data file."""

    split: str = "test"
    data: DataConfig | None = None
    label: str | None = None  # a transfer's name (default: its data format; two JSONL transfers need one each)

    @property
    def name(self) -> str:
        return f"transfer-{self.label or self.data.format}" if self.data is not None else self.split

    def questions(self, session: EvalSession) -> list[Question]:
        if self.data is None:
            qs = session.view.split(self.split)
        else:
            qs = load_questions(self.data)
        ungradable = [q.id for q in qs if q.gold is None]
        if ungradable:
            where = self.data.path if self.data is not None else f"the {self.split} split"
            raise ConfigError(f"{where}: {len(ungradable)} question(s) have no gold rubric (first: {ungradable[0]}); "
                              "evaluation grades against gold rubrics")
        schemes = {q.gold.scheme for q in qs if q.gold is not None}
        if len(schemes) > 1:
            raise ConfigError(f"the questions mix gold schemes {sorted(schemes)}; evaluate one benchmark at a time")
        return qs


async def evaluate(session: EvalSession, target: EvalTarget, *, skill_version: int | None = None,
                   on_item: Callable[[GradedResponse], None] | None = None) -> dict[str, Any]:
    """Grade the solver skill (the final one unless `skill_version`) on `target`; write
    RUN/eval/<name>-v<NNN>-<grader>.json (format in docs/evaluation-files.md) and return its record, with
    `file` (where it was written, relative to the run) and `shipped_version` (the run's final solver version)."""
    view = session.view
    if skill_version is not None and skill_version not in (saved := view.versions("solver")):
        # say which versions there are, not which file is absent (v099.md means nothing to the user)
        contiguous = saved == list(range(saved[0], saved[-1] + 1)) if saved else False
        have = (f"solver versions {saved[0]}..{saved[-1]}" if contiguous else
                f"solver versions {', '.join(map(str, saved))}" if saved else "no saved solver version")
        raise ConfigError(f"--skill-version {skill_version}: the run {view.path} has {have}")
    solver = view.final("solver") if skill_version is None else view.skill("solver", skill_version)
    questions = target.questions(session)
    official = session.official(questions[0]) if questions else None  # refuses an unfetched "official" up front

    async def one(q: Question) -> GradedResponse:
        graded = await session.solve_and_grade(q, solver)
        if on_item is not None:
            on_item(graded)
        return graded

    graded = await session.gather(one, questions)
    score = aggregate([g.grade for g in graded])
    grader = independence(view.config.lm, session.lm_config, role_name(score.scheme))
    record: dict[str, Any] = {
        "name": target.name,
        "kind": "transfer" if target.data is not None else "test",
        "benchmark": score.scheme,
        "data": target.data.path if target.data is not None else view.config.data.path,
        "format": target.data.format if target.data is not None else view.config.data.format,
        "split": None if target.data is not None else target.split,
        "skill_version": solver.version,
        "method": view.method,
        "seed": view.seed,
        "run_id": view.run_id,
        "solver_model": model_label(session.lm_config, ["solve"]),
        "grader_model": grader.grader_model,
        "self_graded": grader.self_graded,
        "self_graded_roles": sorted(grader.roles),
        "grader_independence": grader.label,
        "grader_prompt": "official" if official is not None else "ours",
        "grader_prompt_sources": official.provenance() if official is not None else [],
        "score": score.score,
        "headline": bench.headline if (bench := find(score.scheme)) is not None else "score",
        "not_implemented": (bench.not_implemented or None) if bench is not None else None,
        "n_graded": score.n_graded,
        "n_ungraded": score.n_ungraded,
        "details": score.details,
        "items": [g.to_dict() for g in graded],
    }
    # one file per evaluation, skill version and grader: grading another version adds a file (evalfiles.py)
    stem = result_stem(target.name, solver.version, record["grader_model"], record["grader_prompt"])
    session.save(stem, record, EvalFile)
    shipped = view.final("solver").version if skill_version is not None else solver.version
    return {**record, "file": f"{EVAL_DIR}/{stem}.json", "shipped_version": shipped}
