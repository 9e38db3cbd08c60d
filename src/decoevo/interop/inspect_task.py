"""The runtime of an exported Inspect AI task (`decoevo export --to inspect`): imported by its task.py, so
it needs inspect-ai (`pip install 'decoevo[inspect]'`). The scorer is decoevo's judge on the run's judge
model (through decoevo's request cache), its score the rubric's weighted mean S = Σ w·e / Σ w; a judge
that fails after its repairs fails the sample (an error in the log), never a made-up 0."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from inspect_ai import Task
from inspect_ai.dataset import json_dataset
from inspect_ai.model import ChatMessageSystem, GenerateConfig, get_model
from inspect_ai.scorer import Score, Target, mean, scorer
from inspect_ai.solver import Generate, TaskState, generate, solver

from ..domain import Criterion, QuestionView, Rubric
from ..lm import LM, GenParams, LMConfig
from ..roles.judge import judge
from ..scoring import rubric_score


def _settings(folder: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((folder / "decoevo.json").read_text(encoding="utf-8"))
    return data


@solver
def skill_system_message(text: str) -> Any:
    """The skill as the system message, verbatim (no template formatting: a skill may hold braces)."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.messages.insert(0, ChatMessageSystem(content=text))
        return state

    return solve


@scorer(metrics=[mean()])
def decoevo_judge(settings: dict[str, Any]) -> Any:
    judged = settings["judge"]
    config = LMConfig.model_validate(settings["lm"])

    async def score(state: TaskState, target: Target) -> Score:
        meta = state.metadata
        criteria = tuple(Criterion(text=c["criterion"], weight=float(c["weight"])) for c in meta["rubric"])
        rubric = Rubric(question_id=str(state.sample_id), generator_version=int(meta.get("generator_version", 0)),
                        criteria=criteria)
        # the question as decoevo's judge reads it (a conversation as its transcript), else the sample's input
        given = meta.get("question")
        text = given if isinstance(given, str) else state.input_text
        question = QuestionView.from_text(str(state.sample_id), text)
        lm = LM(config)
        try:
            params = GenParams(temperature=0.0, max_tokens=judged["max_tokens"], seed=judged["seed"])
            result = await judge(lm, question, state.output.completion, rubric, mode=judged["mode"], params=params)
        finally:
            await lm.aclose()
        value = rubric_score(rubric, result)
        return Score(value=value, answer=state.output.completion,
                     explanation="\n".join(f"[{s.score:.2f} x{c.weight:g}] {c.text}: {s.rationale}"
                                           for c, s in zip(rubric.criteria, result.scores, strict=True)),
                     metadata={"criterion_scores": [s.score for s in result.scores]})

    return score


def decoevo_task(folder: Path, skill: str = "shipped", system_prompt: str | None = None) -> Task:
    """The task over `folder`'s export: the `skill`'s system message, or `system_prompt`, a file holding an edited
    system prompt (read as it is, every byte the system message)."""
    settings = _settings(folder)
    if skill not in settings["skills"]:
        raise ValueError(f"skill must be one of {', '.join(settings['skills'])}, not {skill!r}")
    system = settings["skills"][skill]["system"]
    name = f"decoevo_{skill}"
    if system_prompt is not None:
        path = Path(system_prompt).expanduser()
        if not path.is_file():
            raise ValueError(f"system_prompt: {path} is not a file; pass -T system_prompt=FILE with the prompt to try")
        system, name = path.read_bytes().decode("utf-8"), "decoevo_system_prompt"  # no newline translation
    solver_cfg = settings["solver"]
    model = get_model(f"openai-api/decoevo/{solver_cfg['model']}", base_url=solver_cfg["base_url"],
                      api_key=os.environ.get(solver_cfg["api_key_env"]) or "not-needed",
                      config=GenerateConfig(temperature=0.0, max_tokens=solver_cfg["max_tokens"],
                                            seed=solver_cfg["seed"]))
    return Task(dataset=json_dataset(str(folder / "dataset.jsonl")),
                solver=[skill_system_message(system), generate()],
                scorer=decoevo_judge(settings), model=model, name=name)
