"""Inputs that used to be taken silently (issue 21, item 8) are refused at load in one line naming the
file, line or key, exit 2, before any model call: an empty chat turn, a boolean for a count, a key given
twice in YAML, a non-finite number, a key file of two lines, a rate that would stall a run for hours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.engine.config import DataConfig, config_from_dict
from decoevo.errors import ConfigError, DatasetError
from decoevo.tasks.load import load_questions

runner = CliRunner()
DEAD = "http://127.0.0.1:9/v1"  # nothing listens: a test that reached a model call would fail differently


def said(result: object) -> str:
    return " ".join(result.output.split())  # type: ignore[attr-defined]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "prompt": f"Question {i}?"}) + "\n" for i in range(12)),
                    encoding="utf-8")
    return path


def refused(tmp_path: Path, data: Path, *extra: str) -> str:
    result = runner.invoke(app, ["run", "--data", str(data), "--base-url", DEAD, "--runs-root",
                                 str(tmp_path / "runs"), *extra])
    assert result.exit_code == 2, result.output
    assert "bug" not in result.output and "Traceback" not in result.output
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("calls.jsonl"))
    return said(result)


@pytest.mark.parametrize("role", ["user", "system"])
@pytest.mark.parametrize("content", ["", "  \n"])
def test_an_empty_chat_turn_is_refused_like_an_empty_prompt(tmp_path: Path, role: str, content: str) -> None:
    path = tmp_path / "q.jsonl"
    turns = [{"role": role, "content": content}, {"role": "user", "content": "hi"}] if role == "system" else \
        [{"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"}, {"role": role,
                                                                                          "content": content}]
    path.write_text(json.dumps({"id": "a", "prompt": turns}) + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"line 1, field 'prompt\[\d\]\.content': is empty"):
        load_questions(DataConfig(path=str(path)))


def test_an_open_assistant_turn_is_still_taken(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    turns = [{"role": "user", "content": "a"}, {"role": "assistant", "content": ""}, {"role": "user", "content": "b"}]
    path.write_text(json.dumps({"id": "a", "prompt": turns}) + "\n", encoding="utf-8")
    (q,) = load_questions(DataConfig(path=str(path)))
    assert q.turns[1].is_open


@pytest.mark.parametrize("setting,key", [("hyper.steps=true", "hyper.steps"), ("splits.train=false", "splits.train"),
                                         ("seed=true", "seed"), ("hyper.rollouts=4.0", "hyper.rollouts"),
                                         ("lm.models.default.max_retries=true", "max_retries")])
def test_a_boolean_or_fraction_is_not_a_count(tmp_path: Path, data: Path, setting: str, key: str) -> None:
    assert key in refused(tmp_path, data, "--set", setting)


@pytest.mark.parametrize("setting", ["lm.models.default.timeout_s=.inf", "lm.models.default.connect_timeout_s=.nan",
                                     "lm.models.default.input_price_per_mtok=.inf", "hyper.epsilon=.inf",
                                     "budget.max_cost=.inf", "lm.models.default.requests_per_minute=.inf"])
def test_non_finite_numbers_are_refused(tmp_path: Path, data: Path, setting: str) -> None:
    assert "finite number" in refused(tmp_path, data, "--set", setting)


def test_a_key_given_twice_in_yaml_names_the_key_and_both_lines(tmp_path: Path, data: Path) -> None:
    config = tmp_path / "run.yaml"
    config.write_text("hyper:\n  steps: 2\n  epsilon: 0.02\n  steps: 5\n", encoding="utf-8")
    message = refused(tmp_path, data, "--config", str(config))
    assert f"{config}, line 4: the key 'steps' is given twice" in message and "first on line 2" in message


@pytest.mark.parametrize("text,problem", [("sk-one\nsk-two\n", "holds 2 lines"), ("\n \n", "is empty")])
def test_a_key_file_that_is_not_one_key_is_named(tmp_path: Path, data: Path, text: str, problem: str) -> None:
    key = tmp_path / "key.txt"
    key.write_text(text, encoding="utf-8")
    message = refused(tmp_path, data, "--set", f"lm.models.default.api_key_file={key}")
    assert f"api_key_file {key} {problem}" in message and "sk-" not in message


@pytest.mark.parametrize("setting,wait", [("requests_per_minute=0.001", "one request every 16.7 h"),
                                          ("requests_per_minute=0.5", "one request every 2 min"),
                                          ("tokens_per_minute=10", "100 min for a request of 1,000 tokens")])
def test_a_rate_that_would_stall_for_hours_is_refused_with_the_wait(tmp_path: Path, data: Path, setting: str,
                                                                   wait: str) -> None:
    assert wait in refused(tmp_path, data, "--set", f"lm.models.default.{setting}")


def test_realistic_rates_and_counts_are_taken() -> None:
    base = {"data": {"path": "q.jsonl"}, "hyper": {"steps": 3, "epsilon": 0.02},
            "lm": {"models": {"default": {"backend": "openai", "base_url": DEAD, "requests_per_minute": 1,
                                          "tokens_per_minute": 1000, "timeout_s": 30, "input_price_per_mtok": 0}}}}
    config = config_from_dict(base)
    assert config.hyper.steps == 3 and config.lm.models["default"].timeout_s == 30.0
    with pytest.raises(ConfigError, match=r"hyper\.steps"):
        config_from_dict({**base, "hyper": {"steps": "3"}})  # a quoted number is text, not a count
