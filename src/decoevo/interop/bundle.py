"""What an export holds, gathered once for either tool: the two skills, the questions, each question's
rubric from the run's final generator, and the run's endpoint (its URL, model and the name of its key's
environment variable, never the key)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..domain import Question, Rubric, Skill
from ..errors import ConfigError
from ..evaluation.run_view import RunView
from ..lm import LM, LMConfig, ModelSpec
from ..lm.cache import default_cache_path
from ..lm.endpoint import EndpointMemory, EndpointProfile, endpoints_path
from ..roles.solve import BASE_INSTRUCTIONS
from .promptfoo_text import is_identifier
from .rubrics import generator_rubrics

# characters an endpoint's URL or model name never needs, and a tool's config must not be handed: template
# braces (promptfoo renders its provider settings), line breaks and other control characters
_NOT_IN_ENDPOINTS = re.compile(r"[{}\x00-\x1f\x7f-\x9f\u2028\u2029]")


@dataclass(frozen=True)
class Endpoint:
    """The model a tool calls. Checked when made: its fields are written into tools' configs, so each is
    what it says (a URL, a model name, an environment variable's name) and nothing a tool could run."""

    base_url: str
    model: str
    api_key_env: str
    # how a JSON schema is sent there: what decoevo negotiated with the endpoint (lm/endpoint.py)
    profile: EndpointProfile = field(default_factory=EndpointProfile)

    def __post_init__(self) -> None:
        if not is_identifier(self.api_key_env):
            raise ConfigError(f"api_key_env {self.api_key_env!r} is not an environment variable's name (letters, "
                              "digits and _, not starting with a digit)")
        for name, value in (("model", self.model), ("base_url", self.base_url)):
            bad = _NOT_IN_ENDPOINTS.search(value)
            if bad or not value.strip():
                raise ConfigError(f"the {name} {value[:80]!r} holds {'nothing' if not bad else repr(bad.group())},"
                                  f" which no endpoint's {name} has; exports write only URLs and model names")


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
    lm: LMConfig  # the run's model configuration (names, URLs, the key's variable: no key)


def solver_system(skill: Skill) -> str:
    """The system message decoevo's solve role sends for this skill (roles/solve.py)."""
    return f"{BASE_INSTRUCTIONS}\n\nStrategy to follow:\n{skill.text}" if skill.text.strip() else BASE_INSTRUCTIONS


def negotiated(spec: ModelSpec, cache_path: str | None) -> EndpointProfile:
    """How decoevo writes requests to this endpoint: the user's settings, else what it learned there."""
    memory = EndpointMemory(endpoints_path(Path(cache_path) if cache_path else default_cache_path()))
    return EndpointProfile.initial(spec, memory.get(spec.identity()))


def endpoint(view: RunView, role: str, override: Endpoint | None) -> Endpoint:
    spec: ModelSpec = view.config.lm.models[view.config.lm.model_for(role)]
    if override is not None:
        probe = spec.model_copy(update={"backend": "openai", "base_url": override.base_url, "model": override.model,
                                        "gguf_path": None})
        return replace(override, profile=negotiated(probe, view.config.lm.cache_path))
    if spec.backend == "local" or not spec.base_url:  # a LiteLLM provider's own API has no URL to write
        what = "the embedded one" if spec.backend == "local" else f"{spec.model!r} through LiteLLM with no base_url"
        raise ConfigError(f"{view.path}: the run's {role} model is {what}, which no eval tool can call; "
                          "serve a model over an OpenAI-compatible API and pass --base-url URL --model NAME")
    try:
        return Endpoint(spec.base_url.rstrip("/"), spec.model, spec.api_key_env,
                        negotiated(spec, view.config.lm.cache_path))
    except ConfigError as exc:
        raise ConfigError(f"{view.path / 'config.yaml'}: the {role} model's {exc}") from None


def run_questions(view: RunView) -> list[Question]:
    if not view.split_ids.get("test"):
        raise ConfigError(f"{view.path}: the run's test split is empty; pass --data FILE with the questions to export")
    return view.split("test")


async def gather_bundle(run_dir: Path, questions: Sequence[Question] | None = None, *,
                        override: Endpoint | None = None, lm: LM | None = None) -> Bundle:
    view = RunView(run_dir)
    qs = list(questions) if questions is not None else run_questions(view)
    endpoint(view, "solve", override), endpoint(view, "judge", override)  # refused before anything is paid
    rubrics = await generator_rubrics(view, qs, lm=lm)
    # read after the rubrics: generating them may have been the endpoint's first structured call
    solver, judge = endpoint(view, "solve", override), endpoint(view, "judge", override)
    hyper = view.config.hyper
    return Bundle(run=str(view.path), shipped=view.final("solver"), initial=view.skill("solver", 0),
                  generator=rubrics.generator, questions=tuple(qs), rubrics=rubrics.rubrics, solver=solver,
                  judge=judge, judge_mode=hyper.judge_mode, seed=view.seed, max_tokens_solve=hyper.max_tokens_solve,
                  max_tokens_judge=hyper.max_tokens_judge, lm=view.config.lm)
