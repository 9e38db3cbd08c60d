"""Running the engine in the known-truth world, and measuring a run against the truth.

Measurements go through the same prompts the engine sends (`roles.*.messages` -> `openai_body`), so the
world answers them exactly as it answered the run: the gold score of a solver skill is the world's gold
score of the replies to the solve prompts the engine would send, a rubric's precision and recall are read
from the rubrics the generator skill's prompt gets.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..domain import Criterion, CriterionScore, Judgement, Question, QuestionView, Rubric, Skill
from ..engine.config import RunConfig, config_from_dict
from ..engine.run import Engine, RunResult
from ..lm import LM, LMConfig, RequestCache
from ..lm.structured import schema_for
from ..lm.types import BackendRequest, GenParams, Message
from ..roles import generate_rubric, judge, solve
from ..roles.generate_rubric import rubric_schema
from ..roles.judge import joint_schema
from ..rundir import RunEvent
from ..scoring import rubric_score
from .sim_backend import openai_body, run_virtual
from .truth_world import TAG, TruthWorld, question_number, truth_backend


@dataclass(frozen=True)
class WorldFiles:
    questions: Path
    spec: Path


def write_world_files(world: TruthWorld, directory: Path, n_questions: int) -> WorldFiles:
    directory.mkdir(parents=True, exist_ok=True)
    questions = directory / "questions.jsonl"
    questions.write_text("".join(json.dumps(q) + "\n" for q in world.questions(n_questions)), encoding="utf-8")
    spec = directory / "spec.md"
    spec.write_text(world.spec_text() + "\n", encoding="utf-8")
    return WorldFiles(questions, spec)


def world_config(
    world: TruthWorld,
    files: WorldFiles,
    method: str,
    seed: int,
    *,
    splits: dict[str, int],
    hyper: dict[str, Any],
    initial_solver_skill: str | None = None,
    budget: dict[str, Any] | None = None,
) -> RunConfig:
    return config_from_dict(
        {
            "method": method,
            "seed": seed,
            "data": {"path": str(files.questions), "format": "jsonl", "task_spec": str(files.spec)},
            "splits": splits,
            "hyper": hyper,
            "budget": budget or {},
            "initial_generator_skill": world.initial_generator_skill(),
            "initial_solver_skill": initial_solver_skill,
        }
    )


@dataclass
class Trace:
    """The skills in force after each inner step (for trajectories) and the gate decisions."""

    steps: list[tuple[int, str, str]] = field(default_factory=list)  # (step, solver text, generator text)
    events: list[dict[str, Any]] = field(default_factory=list)

    def observe(self, event: RunEvent, state: Any) -> None:
        data = event.model_dump(mode="json")
        self.events.append(data)
        if data.get("event") == "inner_step":
            self.steps.append((int(data["step"]), state.solver.text, state.generator.text))


def run_in_process(
    world: TruthWorld, config: RunConfig, run_dir: Path, questions: list[Question] | None = None
) -> tuple[RunResult, Trace]:
    """One run against the world in process, on a virtual clock (the world answers at once)."""
    trace = Trace()
    backend = truth_backend(world)
    cache = RequestCache(run_dir.parent / f"{run_dir.name}.cache")
    lm = LM(LMConfig(), backends={"default": backend}, cache=cache)
    engine = Engine(config, run_dir, lm=lm, observer=trace.observe, questions=questions)
    try:
        result, _ = run_virtual(engine.run_async())
    finally:
        cache.close()
    return result, trace


# ---- measuring against the truth --------------------------------------------------------------------
def _reply(world: TruthWorld, messages: list[Message], schema: Any = None, seed: int = 0) -> str:
    params = GenParams(temperature=0.0, max_tokens=2048, seed=seed)
    request = BackendRequest(
        model="sim", messages=tuple(messages), params=params, json_schema=None if schema is None else schema_for(schema)
    )
    return world.reply(openai_body(request)).content


def responses(world: TruthWorld, skill_text: str, questions: list[QuestionView], seed: int = 0) -> list[str]:
    skill = Skill(kind="solver", version=0, text=skill_text)
    return [_reply(world, solve.messages(q, skill), seed=seed) for q in questions]


def gold_score(world: TruthWorld, skill_text: str, questions: list[QuestionView], seed: int = 0) -> float:
    """Mean gold score (0-100) of the solver skill's answers, as the engine's solve prompt gets them."""
    answers = responses(world, skill_text, questions, seed)
    numbers = [question_number(q.as_text()) for q in questions]
    return 100 * statistics.fmean(world.gold(r, n) for r, n in zip(answers, numbers, strict=True))


def rubric_tags(
    world: TruthWorld, generator_text: str, questions: list[QuestionView], max_criteria: int = 8, seed: int = 0
) -> list[list[list[str]]]:
    """Per question, per criterion, the tags the criterion names."""
    skill = Skill(kind="generator", version=0, text=generator_text)
    out = []
    for q in questions:
        raw = json.loads(_reply(world, generate_rubric.messages(q, skill), rubric_schema(max_criteria), seed))
        out.append([TAG.findall(c["criterion"]) for c in raw["criteria"]])
    return out


def rubric_alignment(
    world: TruthWorld, generator_text: str, questions: list[QuestionView], max_criteria: int = 8, seed: int = 0
) -> dict[str, float]:
    """Criterion-level precision (criteria that name a latent requirement) and recall (latent
    requirements some criterion names), pooled over questions, with F1."""
    latent = set(world.by_tag)
    n_criteria = n_true = n_found = 0
    for criteria in rubric_tags(world, generator_text, questions, max_criteria, seed):
        n_criteria += len(criteria)
        n_true += sum(1 for c in criteria if c and c[0] in latent)
        n_found += len({c[0] for c in criteria if c and c[0] in latent})
    precision = n_true / n_criteria if n_criteria else 0.0
    recall = n_found / (len(latent) * len(questions)) if questions else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": precision, "recall": recall, "f1": f1}


def proxy_score(
    world: TruthWorld,
    solver_text: str,
    generator_text: str,
    questions: list[QuestionView],
    max_criteria: int = 8,
    seed: int = 0,
) -> float:
    """J (0-100): the solver's answers judged by the world's judge under the generator's rubrics."""
    solver = Skill(kind="solver", version=0, text=solver_text)
    generator = Skill(kind="generator", version=0, text=generator_text)
    scores = []
    for q in questions:
        answer = _reply(world, solve.messages(q, solver), seed=seed)
        raw = json.loads(_reply(world, generate_rubric.messages(q, generator), rubric_schema(max_criteria), seed))
        rubric = Rubric(
            question_id=q.id,
            generator_version=0,
            criteria=tuple(Criterion(text=c["criterion"], weight=c["weight"]) for c in raw["criteria"]),
        )
        verdicts = json.loads(
            _reply(world, judge.joint_messages(q, answer, rubric), joint_schema(len(rubric.criteria)), seed)
        )["verdicts"]
        judged = Judgement(question_id=q.id, scores=tuple(CriterionScore(score=v["level"] / 4) for v in verdicts))
        scores.append(rubric_score(rubric, judged))
    return 100 * statistics.fmean(scores)


def views(questions: list[Question], ids: list[str]) -> list[QuestionView]:
    by_id = {q.id: q for q in questions}
    return [by_id[i].view() for i in ids]
