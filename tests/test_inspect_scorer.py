"""The exported Inspect task's scorer, fast (the tool itself runs in tests/test_export_hostile.py and, slow, in
tests/test_interop_tools.py): it scores S = Σ w·e / Σ w over the sample's rubric, with decoevo's judge on the
run's model, and the question the judge reads is the sample's question as decoevo's judge reads it."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.model import ModelName, ModelOutput
from inspect_ai.scorer import Target
from inspect_ai.solver import TaskState

from decoevo.interop.inspect_task import decoevo_judge
from decoevo.lm import LMConfig
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app

LEVELS = [4, 0]  # the first criterion fully met, the second not at all


def verdicts(body: dict[str, Any], n: int) -> Reply:
    return Reply(content=json.dumps({"verdicts": [{"rationale": "r", "level": v} for v in LEVELS]}))


async def test_the_score_is_the_rubrics_weighted_mean_on_the_question_decoevo_reads(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    server = FakeOpenAI(verdicts)
    with serve_app(server.app()) as url:
        lm = LMConfig.model_validate({"models": {"default": {"backend": "openai", "base_url": f"{url}/v1",
                                                             "model": "judge"}}})
        settings = {"judge": {"mode": "joint", "max_tokens": 200, "seed": 1}, "lm": lm.model_dump(mode="json")}
        transcript = "[user]\nfirst turn\n\n[assistant]\nreply\n\n[user]\nsecond turn"
        state = TaskState(model=ModelName("openai/x"), sample_id="q1", epoch=0, input="second turn", messages=[],
                          output=ModelOutput.from_content("x", "my answer"),
                          metadata={"rubric": [{"criterion": "Says A", "weight": 3},
                                               {"criterion": "Says B", "weight": 1}],
                                    "generator_version": 2, "question": transcript})
        score = await decoevo_judge(settings)(state, Target(""))
    assert score.value == pytest.approx(3 / 4)  # weighted: (3·1 + 1·0) / 4, not the plain mean 0.5
    (request,) = server.requests
    assert "> first turn" in request["messages"][1]["content"]  # the whole conversation, quoted
