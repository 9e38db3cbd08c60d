"""The exported Inspect task's scorer, fast (the tool itself runs in tests/test_export_hostile.py and, slow, in
tests/test_interop_tools.py): it scores S = Σ w·e / Σ w over the sample's rubric, with decoevo's judge on the
run's model, and the question the judge reads is the sample's question as decoevo's judge reads it."""

from __future__ import annotations

import gc
import json
import warnings
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("inspect_ai")

from inspect_ai.model import ModelName, ModelOutput
from inspect_ai.scorer import Target
from inspect_ai.solver import TaskState

from decoevo.interop.inspect_task import decoevo_judge, decoevo_task
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


async def test_the_scorer_closes_the_judge_model_it_opens_for_each_sample(tmp_path, monkeypatch) -> None:
    """Issue 46.2: each sample's judge LM is closed once its score is in; left open (the close removed), every
    sample scored left an HTTP session that is reported as "Unclosed client session" when collected, a line
    per sample in the user's `inspect eval` output."""
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    with serve_app(FakeOpenAI(verdicts).app()) as url:
        lm = LMConfig.model_validate({"models": {"default": {"backend": "openai", "base_url": f"{url}/v1",
                                                             "model": "judge"}}})
        scorer = decoevo_judge({"judge": {"mode": "joint", "max_tokens": 200, "seed": 1},
                                "lm": lm.model_dump(mode="json")})
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            for i in range(2):  # a paid judge request each: a session opened each
                state = TaskState(model=ModelName("openai/x"), sample_id=f"q{i}", epoch=0, input=f"question {i}",
                                  messages=[], output=ModelOutput.from_content("x", f"answer {i}"),
                                  metadata={"rubric": [{"criterion": "Says A", "weight": 3},
                                                       {"criterion": "Says B", "weight": 1}]})
                assert (await scorer(state, Target(""))).value == pytest.approx(3 / 4)
            gc.collect()  # a session left open is reported when collected
    assert [str(w.message) for w in seen if "Unclosed" in str(w.message)] == []


def _export_folder(tmp_path: Path) -> Path:
    """An export's two data files as `export --to inspect` writes them (inspect_out.settings' fields)."""
    lm = LMConfig.model_validate({"models": {"default": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1",
                                                         "model": "judge"}}})
    settings = {"skills": {"shipped": {"version": 2, "system": "Shipped {skill} text"},
                           "initial": {"version": 0, "system": "Initial text"}},
                "solver": {"base_url": "http://127.0.0.1:9/v1", "model": "solver-m", "api_key_env": "MY_SOLVER_KEY",
                           "max_tokens": 321, "seed": 7},
                "judge": {"mode": "joint", "max_tokens": 200, "seed": 1}, "lm": lm.model_dump(mode="json")}
    tmp_path.mkdir()
    (tmp_path / "decoevo.json").write_text(json.dumps(settings), encoding="utf-8")
    rows = [{"input": f"question {i}", "id": f"q{i}", "metadata": {"rubric": [{"criterion": "Says A", "weight": 1}]}}
            for i in range(3)]
    (tmp_path / "dataset.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return tmp_path


async def _system_message(task: Any) -> str:
    """The system message the task's solver puts before the question (its generate step answered by nothing)."""
    async def no_model(state: TaskState, **_: Any) -> TaskState:
        return state

    state = TaskState(model=ModelName("openai/x"), sample_id="q0", epoch=0, input="question 0", messages=[])
    done = await task.solver(state, no_model)
    return str(done.messages[0].content)


async def test_the_task_answers_with_the_chosen_skill_or_an_edited_prompt_file_byte_for_byte(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`inspect eval task.py [-T skill=initial] [-T system_prompt=FILE]`: every sample of the dataset, the skill's
    system message verbatim (braces and all), the run's solver model with the key from the variable the export
    names; an unknown skill or a missing prompt file is refused, never a default."""
    folder = _export_folder(tmp_path / "export")
    monkeypatch.setenv("MY_SOLVER_KEY", "sk-from-the-variable")
    task = decoevo_task(folder)
    assert task.name == "decoevo_shipped" and len(task.dataset) == 3
    assert await _system_message(task) == "Shipped {skill} text"
    assert task.model is not None and task.model.api.api_key == "sk-from-the-variable"
    assert await _system_message(decoevo_task(folder, skill="initial")) == "Initial text"
    edited = tmp_path / "edited.txt"
    edited.write_bytes(b"Edited\r\nprompt {x}")
    by_file = decoevo_task(folder, system_prompt=str(edited))
    assert by_file.name == "decoevo_system_prompt" and await _system_message(by_file) == "Edited\r\nprompt {x}"
    with pytest.raises(ValueError, match="skill must be one of"):
        decoevo_task(folder, skill="v9")
    with pytest.raises(ValueError, match="is not a file"):
        decoevo_task(folder, system_prompt=str(tmp_path / "missing.txt"))
