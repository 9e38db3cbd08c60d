"""What an export holds, gathered once for either tool: the two skills, the questions, each question's
rubric from the run's final generator, and the run's endpoint (its URL, model and the name of its key's
environment variable, never the key)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..domain import Question, Rubric, Skill
from ..errors import ConfigError
from ..evaluation.run_view import RunView
from ..lm import LM, ModelSpec
from ..roles.solve import BASE_INSTRUCTIONS
from .rubrics import generator_rubrics


@dataclass(frozen=True)
class Endpoint:
    base_url: str
    model: str
    api_key_env: str


@dataclass(frozen=True)
class Bundle:
    run: str
    shipped: Skill
    initial: Skill
    generator: Skill
    questions: tuple[Question, ...]
    rubrics: dict[str, Rubric]
    solver: Endpoint
    judge: Endpoint
    judge_mode: str
    seed: int
    max_tokens_solve: int
    max_tokens_judge: int


def solver_system(skill: Skill) -> str:
    """The system message decoevo's solve role sends for this skill (roles/solve.py)."""
    return f"{BASE_INSTRUCTIONS}\n\nStrategy to follow:\n{skill.text}" if skill.text.strip() else BASE_INSTRUCTIONS


def endpoint(view: RunView, role: str, override: Endpoint | None) -> Endpoint:
    spec: ModelSpec = view.config.lm.models[view.config.lm.model_for(role)]
    if override is not None:
        return override
    if spec.backend == "local" or not spec.base_url:
        raise ConfigError(f"{view.path}: the run's {role} model is the embedded one, which no eval tool can call; "
                          "serve a model over an OpenAI-compatible API and pass --base-url URL --model NAME")
    return Endpoint(spec.base_url.rstrip("/"), spec.model, spec.api_key_env)


def run_questions(view: RunView) -> list[Question]:
    if not view.split_ids.get("test"):
        raise ConfigError(f"{view.path}: the run's test split is empty; pass --data FILE with the questions to export")
    return view.split("test")


async def gather_bundle(run_dir: Path, questions: Sequence[Question] | None = None, *,
                        override: Endpoint | None = None, lm: LM | None = None) -> Bundle:
    view = RunView(run_dir)
    qs = list(questions) if questions is not None else run_questions(view)
    solver, judge = endpoint(view, "solve", override), endpoint(view, "judge", override)
    rubrics = await generator_rubrics(view, qs, lm=lm)
    hyper = view.config.hyper
    return Bundle(run=str(view.path), shipped=view.final("solver"), initial=view.skill("solver", 0),
                  generator=rubrics.generator, questions=tuple(qs), rubrics=rubrics.rubrics, solver=solver,
                  judge=judge, judge_mode=hyper.judge_mode, seed=view.seed, max_tokens_solve=hyper.max_tokens_solve,
                  max_tokens_judge=hyper.max_tokens_judge)
