"""The Python API at its boundary: any argument of any type is taken, or refused with the library's own
error (`UserError`: `ArgumentError`/`ConfigError`) in one line before anything is written, and a file of
the user's is never written over or deleted. The run itself is stubbed in the property tests (it is
tested end to end in test_api.py); the data-loss cases run the real code."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import decoevo
import decoevo.api as api
from decoevo.engine.config import RunConfig
from decoevo.errors import ArgumentError, ConfigError, UserError

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
GOOD = [{"id": "q1", "prompt": "What is 2+2?"}, {"id": "q2", "prompt": "Name a colour."}]
MINE = '{"id": "mine", "prompt": "my own question"}\n'


class Nothing:
    """An object with no methods a callback would have."""


ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8)
    | st.binary(max_size=4) | st.just(Nothing()) | st.just(object) | st.just(print) | st.just(Path("x")),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    | st.tuples(inner) | st.sets(st.integers(), max_size=2), max_leaves=6)


@pytest.fixture
def reached(monkeypatch: pytest.MonkeyPatch) -> list[RunConfig]:
    """Stub the run: what reaches it is recorded (and its temporary directory removed)."""
    seen: list[RunConfig] = []

    async def run(cfg: RunConfig, path: Path, **_: Any) -> str:
        seen.append(cfg)
        if str(path).startswith(tempfile.gettempdir()) and path.name.startswith("decoevo-run-"):
            shutil.rmtree(path, ignore_errors=True)
        return "ran"

    monkeypatch.setattr(api, "run_config_async", run)
    return seen


def taken_or_one_line(call: Any) -> str:
    try:
        call()
    except UserError as exc:
        message = str(exc)
        assert message.strip() and "\n" not in message, repr(message)
        return "refused"
    return "taken"


ARGUMENTS = ["questions", "method", "lm", "task_spec", "task", "hyper", "splits", "budget", "seed", "preset",
             "config", "callbacks"]


@SETTINGS
@given(name=st.sampled_from(ARGUMENTS), value=ANY)
def test_any_argument_of_any_type_is_taken_or_refused_in_one_line(reached: list[RunConfig], name: str,
                                                                  value: Any) -> None:
    kwargs: dict[str, Any] = {"questions": GOOD, "preset": "quick", name: value}
    questions = kwargs.pop("questions")
    outcome = taken_or_one_line(lambda: decoevo.optimize(questions, **kwargs))
    assert (outcome == "taken") == bool(reached)
    reached.clear()


@SETTINGS
@given(value=ANY, name=st.sampled_from(["questions", "method", "lm", "hyper", "callbacks", "run_dir"]))
def test_a_users_directory_is_never_written_to(reached: list[RunConfig], tmp_path: Path, name: str,
                                               value: Any) -> None:
    home = Path(tempfile.mkdtemp(dir=tmp_path))
    (home / "questions.jsonl").write_text(MINE, encoding="utf-8")
    kwargs: dict[str, Any] = {"preset": "quick", "run_dir": home}
    if name != "run_dir":
        kwargs[name] = value
    questions = kwargs.pop("questions", GOOD)
    assert taken_or_one_line(lambda: decoevo.optimize(questions, **kwargs)) == "refused"
    assert [p.name for p in home.iterdir()] == ["questions.jsonl"] and not reached
    assert (home / "questions.jsonl").read_text(encoding="utf-8") == MINE


@pytest.mark.parametrize("questions,match", [("hello", "questions must be a list"), ([1, 2, 3], r"questions\[0\]"),
                                             ({"id": "a"}, "not dict"), ([{"id": "a", "prompt": {1, 2}}], "JSON"),
                                             ([{"id": "a", "prompt": "\ud800"}], "JSON")])
def test_questions_of_the_wrong_kind_are_named(reached: list[RunConfig], questions: Any, match: str) -> None:
    with pytest.raises(ArgumentError, match=match):
        decoevo.optimize(questions)
    assert not reached


@pytest.mark.parametrize("kwargs,error,match", [
    ({"lm": "garbage"}, ArgumentError, "lm must be a decoevo.ModelSpec"),
    ({"lm": 5}, ArgumentError, "not int"),
    ({"lm": {"models": 5}}, ConfigError, "lm.models"),
    ({"callbacks": [1, "x"]}, ArgumentError, r"callbacks\[0\] \(int\) has neither"),
    ({"callbacks": "x"}, ArgumentError, "callbacks must be a list"),
    ({"seed": True}, ArgumentError, "seed must be an integer"),
    ({"method": 3}, ArgumentError, "method must be a string"),
    ({"method": "nosuch"}, ConfigError, "nosuch"),
    ({"hyper": [1]}, ArgumentError, "hyper must be a mapping"),
])
def test_wrong_arguments_are_refused_at_the_boundary(reached: list[RunConfig], kwargs: dict[str, Any],
                                                     error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match) as caught:
        decoevo.optimize(GOOD, **kwargs)
    assert isinstance(caught.value, UserError) and not reached


def test_argument_errors_are_also_the_python_errors_callers_expect() -> None:
    with pytest.raises(TypeError):
        decoevo.optimize("hello")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        decoevo.optimize([1])  # type: ignore[list-item]


# ---- the real code: nothing of the user's is written over or deleted --------------------------------

def test_a_refused_method_leaves_the_users_questions_file_alone(tmp_path: Path) -> None:
    """Issue 21 item 5: the user's own questions.jsonl in run_dir was overwritten, then deleted."""
    (tmp_path / "questions.jsonl").write_text(MINE, encoding="utf-8")
    with pytest.raises(ConfigError):
        decoevo.optimize(GOOD, run_dir=tmp_path, method="nosuch")
    assert (tmp_path / "questions.jsonl").read_text(encoding="utf-8") == MINE


def test_a_valid_call_into_a_directory_with_files_is_refused_before_writing(tmp_path: Path) -> None:
    (tmp_path / "questions.jsonl").write_text(MINE, encoding="utf-8")
    (tmp_path / "task_spec.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match="not empty"):
        decoevo.optimize(GOOD, run_dir=tmp_path, task_spec="theirs", preset="quick")
    assert (tmp_path / "questions.jsonl").read_text(encoding="utf-8") == MINE
    assert (tmp_path / "task_spec.txt").read_text(encoding="utf-8") == "mine"


def test_run_dir_naming_a_file_is_named(tmp_path: Path) -> None:
    mine = tmp_path / "notes.txt"
    mine.write_text("mine", encoding="utf-8")
    with pytest.raises(ArgumentError, match="is a file"):
        decoevo.optimize(GOOD, run_dir=mine)
    assert mine.read_text(encoding="utf-8") == "mine"


def test_an_empty_run_dir_is_used_and_nothing_is_left_when_refused(tmp_path: Path, reached: list[RunConfig]) -> None:
    empty = tmp_path / "run"
    empty.mkdir()
    assert decoevo.optimize(GOOD, run_dir=empty, preset="quick") == "ran"  # type: ignore[comparison-overlap]
    assert (empty / "questions.jsonl").read_text(encoding="utf-8").count("\n") == 2
    assert Path(reached[0].data.path) == empty / "questions.jsonl"


def test_other_entry_points_name_their_arguments(tmp_path: Path) -> None:
    with pytest.raises(ArgumentError, match="resume: run_dir must be a path"):
        decoevo.resume(5)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="evaluate: run must be"):
        decoevo.evaluate(None)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="evaluate: data must be a mapping"):
        decoevo.evaluate(tmp_path, data="q.jsonl")  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="evaluate: skill_version must be an integer"):
        decoevo.evaluate(tmp_path, skill_version="2")  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="run_config: config must be a RunConfig"):
        decoevo.run_config({"method": "decoevo"}, tmp_path / "r")  # type: ignore[arg-type]


def test_a_run_that_fails_before_any_call_leaves_an_empty_run_dir_empty(tmp_path: Path) -> None:
    empty = tmp_path / "run"
    empty.mkdir()
    dead = decoevo.ModelSpec(backend="openai", model="m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(UserError, match="prompt"):
        decoevo.optimize([{"id": "a", "prompt": " "}, *GOOD], run_dir=empty, lm=dead, preset="quick")
    assert list(empty.iterdir()) == []
