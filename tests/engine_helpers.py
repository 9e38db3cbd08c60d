"""Building runs on the toy world for engine tests."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from decoevo.domain import Question
from decoevo.engine.config import config_from_dict
from decoevo.engine.run import Engine
from decoevo.lm import LM, LMConfig, RequestCache
from decoevo.testing.scripted import ScriptedBackend, toy_world_backend


def toy_questions(n: int = 16) -> list[Question]:
    return [Question.from_text(f"q{i:02d}", f"My knee hurts after running, case {i}. What should I do?",
                               task="healthbench") for i in range(n)]


def toy_config(method: str, budget_match: str | None = None, **hyper: Any) -> Any:
    return config_from_dict({
        "method": method, "seed": 7, "data": {"path": "unused.jsonl"},
        "budget": {"match_run": budget_match} if budget_match else {},
        "splits": {"train": 6, "probe": 2, "solver_gate": 3, "generator_gate": 3},
        "hyper": {"steps": 2, "batch_size": 2, "audit_every": 1, "rollouts": 4, "concurrency": 4, **hyper},
    })


def toy_engine(tmp_path: Path, method: str, backend: ScriptedBackend | None = None, run_name: str | None = None,
               cache: RequestCache | None = None, **hyper: Any) -> tuple[Engine, ScriptedBackend]:
    backend = backend or toy_world_backend()
    # `cache or ...` would replace an empty cache (RequestCache has __len__): compare with None
    cache = cache if cache is not None else RequestCache(tmp_path / "cache.sqlite")
    lm = LM(LMConfig(), backends={"default": backend}, cache=cache)
    questions = [Question(**q.model_dump()) for q in toy_questions()]
    engine = Engine(toy_config(method, **hyper), tmp_path / (run_name or method), lm=lm, questions=questions)
    return engine, backend


def outer_round_events(run_dir: Path) -> list[dict[str, Any]]:
    """The run's `outer_round` events, in order."""
    events = [json.loads(x) for x in (run_dir / "events.jsonl").read_text().splitlines()]
    return [e for e in events if e["event"] == "outer_round"]


def forbid_solver_score(monkeypatch: Any) -> None:
    """Fail the test if the generator's acceptance ever computes the solver's aggregate score."""
    from decoevo.engine import outer as outer_module

    async def forbidden(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the generator acceptance looked at the solver's aggregate score")

    monkeypatch.setattr(outer_module, "solver_score_objective", forbidden)
