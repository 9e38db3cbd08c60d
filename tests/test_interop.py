"""Issue 38, in: promptfoo configs and Inspect AI datasets read as decoevo's inputs (files written the way
each tool's docs show them), staged into a run; bad files are one line naming file, line and field."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.errors import ConfigError, DatasetError, UserError
from decoevo.interop import read_imported

PROMPTFOO = """\
description: Knee pain helper
prompts:
  - file://prompt.json
providers:
  - openai:gpt-4o-mini
defaultTest:
  assert:
    - type: llm-rubric
      value: Tells the user when to see a doctor
      weight: 3
tests:
  - description: runner's knee
    vars:
      query: "My knee hurts after running. What should I do?"
    assert:
      - type: contains
        value: knee
      - type: not-llm-rubric
        value: Recommends surgery right away
  - vars:
      query: Is it fine to run through the pain?
"""
CHAT = '[{"role": "system", "content": "You are a careful sports-medicine assistant."},\n' \
       ' {"role": "user", "content": "{{query}}"}]'


def write_promptfoo(tmp_path: Path, text: str = PROMPTFOO) -> Path:
    (tmp_path / "prompt.json").write_text(CHAT, encoding="utf-8")
    path = tmp_path / "promptfooconfig.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_promptfoo_config_gives_questions_a_skill_and_the_requirements(tmp_path: Path) -> None:
    got = read_imported(write_promptfoo(tmp_path), "promptfoo")
    assert [q.as_text() for q in got.questions] == ["My knee hurts after running. What should I do?",
                                                    "Is it fine to run through the pain?"]
    assert got.skill == "You are a careful sports-medicine assistant."
    assert got.requirements == ("Tells the user when to see a doctor",
                                "Does not do this: Recommends surgery right away")
    gold = got.questions[0].gold
    assert gold is not None and {(i.text, i.points) for i in gold.items} == {
        ("Recommends surgery right away", -1.0), ("Tells the user when to see a doctor", 3.0)}
    spec = got.task_spec()
    assert spec is not None and "Tells the user when to see a doctor" in spec


def test_a_text_prompt_loses_only_the_question_placeholder(tmp_path: Path) -> None:
    text = PROMPTFOO.replace("  - file://prompt.json", "  - 'Answer briefly and kindly: {{ query }}'")
    got = read_imported(write_promptfoo(tmp_path, text), "promptfoo")
    assert got.skill == "Answer briefly and kindly:"


def test_the_question_variable_is_found_or_named(tmp_path: Path) -> None:
    text = PROMPTFOO.replace("      query: Is it fine", "      topic: knees\n      query: Is it fine")
    path = write_promptfoo(tmp_path, text)
    assert len(read_imported(path, "promptfoo").questions) == 2  # `query`: the one every test has
    with pytest.raises(DatasetError, match=r"field 'prompts\[0\]': the chat prompt never uses \{\{topic\}\}"):
        read_imported(path, "promptfoo", question_var="topic")


@pytest.mark.parametrize(("edit", "where"), [
    (("      query: Is it fine to run through the pain?", "      query: [a, b]"),
     r"line 20, field 'tests\[1\]\.vars\.query': is a list"),
    (("      weight: 3", "      weight: -3"), r"line 8.*defaultTest\.assert\[0\]\.weight"),
    (("prompts:\n  - file://prompt.json\n", ""), "field 'prompts': is missing"),
    (("    vars:\n      query: \"My", "    vars:\n      question: \"My"),
     "field 'tests': cannot tell which variable holds the question"),
])
def test_a_bad_promptfoo_config_is_named_by_line_and_field(tmp_path: Path, edit: tuple[str, str], where: str) -> None:
    assert edit[0] in PROMPTFOO
    with pytest.raises(DatasetError, match=where):
        read_imported(write_promptfoo(tmp_path, PROMPTFOO.replace(*edit)), "promptfoo")


def test_an_inspect_dataset_in_jsonl_and_csv(tmp_path: Path) -> None:
    jsonl = tmp_path / "samples.jsonl"
    jsonl.write_text(
        json.dumps({"id": "a1", "input": "What is the capital of France?", "target": "Paris",
                    "metadata": {"topic": "geo"}}) + "\n"
        + json.dumps({"input": [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "And of Spain?"}], "target": ["Madrid"]}) + "\n",
        encoding="utf-8")
    got = read_imported(jsonl, "inspect")
    assert [q.id for q in got.questions] == ["a1", "s0002"]
    assert got.questions[0].meta["inspect"] == {"target": "Paris", "metadata": {"topic": "geo"}}
    assert [t.role for t in got.questions[1].turns] == ["system", "user"] and got.skill is None
    csv = tmp_path / "samples.csv"
    csv.write_text('id,input,target,topic\nq1,"Name a prime, please.",7,maths\n', encoding="utf-8")
    (q,) = read_imported(csv, "inspect").questions
    assert (q.id, q.as_text(), q.meta["inspect"]["metadata"]) == ("q1", "Name a prime, please.", {"topic": "maths"})


def test_an_exported_inspect_rubric_reads_back_as_gold(tmp_path: Path) -> None:
    path = tmp_path / "dataset.jsonl"
    path.write_text(json.dumps({"id": "q", "input": "hi", "metadata": {"rubric": [
        {"criterion": "Greets back", "weight": 2.0}]}}) + "\n", encoding="utf-8")
    (q,) = read_imported(path, "inspect").questions
    assert q.gold is not None and [(i.text, i.points) for i in q.gold.items] == [("Greets back", 2.0)]


@pytest.mark.parametrize(("line", "where"), [
    ('{"input": ""}', "line 2, field 'input'"),
    ('{"input": [{"role": "tool", "content": "x"}]}', r"line 2, field 'input\[0\]\.role'"),
    ('{"id": "a", "input": "again"}', "line 2, field 'id': duplicate"),
    ('{"input": "x", "metadata": {"rubric": [{"criterion": "c", "weight": 0}]}}', r"rubric\[0\]\.weight"),
    ("[1, 2]", "line 2: each line must be a sample"),
])
def test_a_bad_inspect_sample_is_named_by_line_and_field(tmp_path: Path, line: str, where: str) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text('{"id": "a", "input": "first"}\n' + line + "\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=where):
        read_imported(path, "inspect")


def test_the_command_line_says_one_line_and_exits_2(tmp_path: Path) -> None:
    bad = tmp_path / "promptfooconfig.yaml"
    bad.write_text("prompts: ['{{q}}']\ntests:\n  - vars: {q: [1, 2]}\n", encoding="utf-8")
    for args in (["run", "--data", str(bad), "--format", "promptfoo", "--runs-root", str(tmp_path / "runs")],
                 ["rubric", str(tmp_path), "--data", str(bad), "--format", "promptfoo"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 2, result.output
        assert "line 3" in result.output and "Traceback" not in result.output
    assert not (tmp_path / "runs").exists()  # refused before a run directory was made


yaml_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(["prompts", "tests", "vars", "assert", "type", "value", "weight", "defaultTest",
                         "question", "raw", "input", "id", "metadata", "rubric", "criterion", "role", "content"]),
        inner, max_size=5),
    max_leaves=20)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=yaml_values, fmt=st.sampled_from(["promptfoo", "inspect"]))
def test_any_file_either_reads_or_is_a_user_error(tmp_path: Path, value: object, fmt: str) -> None:
    path = tmp_path / ("c.yaml" if fmt == "promptfoo" else "d.jsonl")
    path.write_text(json.dumps(value) if fmt == "promptfoo" else json.dumps(value) + "\n" + json.dumps(value),
                    encoding="utf-8")
    try:
        got = read_imported(path, fmt)
    except UserError as exc:
        assert "\n" not in str(exc)
        return
    assert got.questions


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(max_size=200))
def test_any_text_either_reads_or_is_a_user_error(tmp_path: Path, text: str) -> None:
    for name, fmt in (("c.yaml", "promptfoo"), ("d.jsonl", "inspect"), ("d.csv", "inspect")):
        path = tmp_path / name
        path.write_text(text, encoding="utf-8", errors="surrogatepass")
        with contextlib.suppress(UserError):  # reading it is fine; anything but a UserError fails the test
            read_imported(path, fmt)


def test_a_promptfoo_config_runs_as_decoevo_input_and_a_failed_start_leaves_nothing(tmp_path: Path) -> None:
    import socket

    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_server

    questions = "".join(f"  - vars:\n      query: My knee hurts after running, case {i}. What should I do?\n"
                        for i in range(16))
    path = write_promptfoo(tmp_path, PROMPTFOO.split("tests:\n")[0] + "tests:\n" + questions)
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    args = ["run", "--data", str(path), "--format", "promptfoo", "--model", "toy", "--preset", "default",
            "--runs-root", str(tmp_path / "runs"), "--name", "pf", "--any-model",
            "--set", "splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",
            "--set", "hyper={steps: 1, batch_size: 2, audit_every: 1, rollouts: 4}"]
    failed = CliRunner().invoke(app, [*args, "--base-url", f"http://127.0.0.1:{dead}/v1",
                                      "--set", "lm.models.default.max_retries=0"],
                                env={"DECOEVO_CACHE": str(tmp_path / "c.sqlite")})
    assert failed.exit_code != 0 and not (tmp_path / "runs" / "pf").exists()  # the same command may run again
    with serve_app(toy_server().app()) as url:
        result = CliRunner().invoke(app, [*args, "--base-url", f"{url}/v1"],
                                    env={"DECOEVO_CACHE": str(tmp_path / "c.sqlite")})
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "pf"
    config = (run / "config.yaml").read_text()
    assert "initial_solver_skill: You are a careful sports-medicine assistant." in config
    assert "Tells the user when to see a doctor" in (run / "task_spec.txt").read_text()
    assert sum(1 for _ in (run / "questions.jsonl").open()) == 16


def _import_run_at_a_dead_port(tmp_path: Path) -> tuple[int, str, int]:
    """`run --format promptfoo` of 16 questions against a port nothing listens on, named `pf` under
    tmp_path/runs: (exit code, the output on one line, the port)."""
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        dead = s.getsockname()[1]
    questions = "".join(f"  - vars:\n      query: My knee hurts after running, case {i}. What should I do?\n"
                        for i in range(16))
    path = write_promptfoo(tmp_path, PROMPTFOO.split("tests:\n")[0] + "tests:\n" + questions)
    result = CliRunner().invoke(app, [
        "run", "--data", str(path), "--format", "promptfoo", "--model", "toy", "--any-model", "--preset", "default",
        "--runs-root", str(tmp_path / "runs"), "--name", "pf", "--base-url", f"http://127.0.0.1:{dead}/v1",
        "--set", "splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",
        "--set", "hyper={steps: 1, batch_size: 2, audit_every: 1, rollouts: 4}",
        "--set", "lm.models.default.max_retries=0"], env={"DECOEVO_CACHE": str(tmp_path / "c.sqlite")})
    return result.exit_code, " ".join(result.output.split()), dead


def test_a_failed_start_says_the_runs_own_error_even_when_its_folder_cannot_be_removed(tmp_path: Path,
                                                                                        monkeypatch) -> None:
    """Issue 46.2: a run that saved nothing removes its staged import, but that clean-up never hides why the run
    failed: a folder that cannot be removed (its last rmdir refused, as a file still open on NFS does) is left
    empty, and the one error said is the endpoint's. With the removal's errors raised, a second error
    (the refused rmdir's "Permission denied") ended the output as if it were why the run failed."""
    import os

    run = tmp_path / "runs" / "pf"
    real_rmdir = os.rmdir

    def refused(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        if Path(path) == run:
            raise PermissionError(13, "Permission denied", str(path))
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", refused)
    code, said, dead = _import_run_at_a_dead_port(tmp_path)
    assert code != 0 and "Permission denied" not in said and "Traceback" not in said, said
    assert f"127.0.0.1:{dead}" in said and said.count("error:") == 1, said  # the endpoint that failed
    assert run.is_dir() and not any(run.iterdir())  # left empty: the same command runs again


def test_a_failed_import_run_that_saved_nothing_says_run_again_not_resume_a_removed_folder(tmp_path: Path) -> None:
    """Issue 46: a `run --format promptfoo` whose first call failed removed its staged folder but still said
    "continue with `decoevo resume RUN`", naming a folder that no longer existed."""
    code, said, _ = _import_run_at_a_dead_port(tmp_path)
    assert code != 0 and said.count("error:") == 1 and "Traceback" not in said, said
    assert not (tmp_path / "runs" / "pf").exists()  # nothing saved: the staged import was removed
    assert "decoevo resume" not in said and "run the same command again" in said, said


def test_an_unknown_format_or_a_question_variable_for_inspect_is_refused(tmp_path: Path) -> None:
    """The library's reader names the formats it reads, and --question-var only where it means something."""
    data = tmp_path / "d.jsonl"
    data.write_text('{"input": "Is it fine?", "target": "Yes"}\n', encoding="utf-8")
    assert len(read_imported(data, "inspect").questions) == 1
    with pytest.raises(ConfigError, match="unknown import format 'csv'"):
        read_imported(data, "csv")
    with pytest.raises(ConfigError, match="--question-var is for --format promptfoo"):
        read_imported(data, "inspect", question_var="query")
