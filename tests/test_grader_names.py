"""A grader (or solver) named by a file path, as a llama.cpp server serves a GGUF without an alias or as an
embedded model is given: terminal lines and the report name it by the file's stem, result files by that stem
and a hash of the whole path (two folders' files of one name never share a result), the record keeps the
path, and a result file named the old way (the path's file name) is still the run's result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.cli.compare import summary_lines
from decoevo.evaluation.models import model_label
from decoevo.lm import LMConfig, ModelSpec
from decoevo.rundir import RunReader
from decoevo.rundir.evalfiles import grader_slug, is_path_name, result_stem, results_of, short_model_name
from decoevo.testing.fake_openai import FakeOpenAI
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, write_toy_questions

pytest.importorskip("uvicorn")
runner = CliRunner()

STEM = "SmolLM2-1.7B-Instruct-Q4_K_M"
PATH_A = f"/root/.cache/models/a/{STEM}.gguf"
PATH_B = f"/root/.cache/models/b/{STEM}.gguf"
SPLITS = "splits={train: 4, probe: 2, solver_gate: 3, generator_gate: 3, test: 4}"


def test_a_path_is_named_by_its_stem_and_a_name_is_kept() -> None:
    assert short_model_name(PATH_A) == STEM
    assert short_model_name(r"C:\models\x.Q4.gguf") == "x.Q4" and short_model_name("./m.gguf") == "m"
    for name in ("gpt-4.1", "Qwen/Qwen3-8B", "openai/gpt-4o", "toy", "smollm2-135m-instruct-q4_1"):
        assert not is_path_name(name) and short_model_name(name) == name
    assert short_model_name(f"{PATH_A}, gpt-4.1") == f"{STEM}, gpt-4.1"


def test_two_graders_sharing_a_stem_never_share_a_file() -> None:
    a, b = result_stem("test", 1, PATH_A, None), result_stem("test", 1, PATH_B, None)
    assert a != b and a.startswith("test-v001-smollm2-1.7b-instruct-q4_k_m-") and a.endswith("-ours")
    assert "/" not in a and ".gguf" not in a
    assert result_stem("test", 1, PATH_A, None) == a  # stable: the same path, the same file
    # served names keep the names they had (a provider's prefix dropped)
    assert grader_slug("openai/gpt-4o", "official") == "gpt-4o-official"


@given(st.text(min_size=1, max_size=200))
def test_a_grader_s_file_name_part_is_always_safe(name: str) -> None:
    part = grader_slug(name, "ours")
    assert part and all(c.isascii() and (c.isalnum() or c in "-._") for c in part), part
    assert len(part) <= 60


def test_an_embedded_model_is_labelled_by_its_file_not_its_default_label() -> None:
    config = LMConfig(models={"default": ModelSpec(gguf_path=PATH_A)})  # `model` left at its default label
    assert model_label(config, ["solve"]) == STEM
    assert model_label(LMConfig(), ["solve"]) == "smollm2-135m-instruct-q4_1"


def test_an_old_named_result_file_is_still_found(tmp_path: Path) -> None:
    """Files are found by listing eval/: one named by the path's file name (before the stem and hash) is the
    run's result beside a new-named one of another grader, and its grader is shown by the stem."""
    record = {"name": "test", "kind": "test", "benchmark": "weighted", "method": "decoevo", "seed": 0,
              "skill_version": 1, "grader_model": PATH_A, "self_graded": False, "grader_prompt": "ours",
              "score": 50.0, "n_graded": 4, "n_ungraded": 0}
    (tmp_path / "eval").mkdir()
    old = f"test-v001-{STEM.lower()}.gguf-ours"
    (tmp_path / "eval" / f"{old}.json").write_text(json.dumps(record))
    new = result_stem("test", 0, PATH_B, "ours")
    (tmp_path / "eval" / f"{new}.json").write_text(json.dumps({**record, "skill_version": 0, "grader_model": PATH_B}))
    reader = RunReader(tmp_path)
    assert sorted(reader.eval_names()) == sorted([old, new])
    evals = {n: reader.eval(n) for n in reader.eval_names()}
    assert results_of(evals, 1) == {"test": old} and results_of(evals, 0) == {"test": new}
    assert short_model_name(str(evals[old].grader_model)) == STEM


@pytest.fixture
def toy_env(toy_env: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """conftest's, at the 80 columns these tests read the terminal at."""
    monkeypatch.setenv("COLUMNS", "80")
    return toy_env


def _said(output: str) -> str:
    return " ".join(output.split())


def test_compare_s_line_names_a_path_grader_by_its_stem(tmp_path: Path) -> None:
    record = {"split": "test", "data": None, "before_version": 0, "after_version": 1, "n_questions": 0,
              "n_paired": 0, "grader_model": PATH_A, "grader_prompt": "ours", "self_graded": False, "rows": [],
              "before_score": None, "after_score": None, "mean_delta": None}
    line = summary_lines(tmp_path, record)[0]
    assert f"grader {STEM}, ours prompt;" in line and "/root" not in line


@pytest.mark.slow  # a run, three gradings and two reports (~15 s); the tests above keep the names and files
def test_eval_compare_and_report_name_a_path_grader_by_its_stem(toy_env: Path) -> None:
    # the toy world served under the run's name and under two GGUF paths of one file name
    server = FakeOpenAI(lambda body, n: toy_reply(body, n), models=("toy", PATH_A, PATH_B))
    with serve_app(server.app()) as url:
        data = write_toy_questions(toy_env / "toy.jsonl")
        trained = runner.invoke(app, toy_run_args(f"{url}/v1", data, toy_env / "runs", "mine", steps=2,
                                                  sets=(SPLITS,)))
        assert trained.exit_code == 0, trained.output
        run = toy_env / "runs" / "mine"
        by = {p: ["--grader-base-url", f"{url}/v1", "--grader-model", p] for p in (PATH_A, PATH_B)}
        first = runner.invoke(app, ["eval", str(run), *by[PATH_A]])
        assert first.exit_code == 0, first.output
        assert f"grader {STEM}, ours prompt" in _said(first.output) and "/root" not in first.output
        as_json = runner.invoke(app, ["eval", str(run), "--json", *by[PATH_A]])
        assert as_json.exit_code == 0, as_json.output
        assert json.loads(as_json.stdout)["grader_model"] == PATH_A  # the whole path where a user needs it
        second = runner.invoke(app, ["eval", str(run), *by[PATH_B]])
        assert second.exit_code == 0, second.output
        compared = runner.invoke(app, ["compare", str(run), *by[PATH_A]])
        assert compared.exit_code == 0, compared.output
        assert f"grader {STEM}, ours prompt" in _said(compared.output) and "/root" not in compared.output

    files = sorted(p.name for p in (run / "eval").glob("test-v001-*.json"))
    assert len(files) == 2 and all(f.startswith("test-v001-smollm2-1.7b-instruct-q4_k_m-") for f in files), files
    assert {json.loads((run / "eval" / f).read_text())["grader_model"] for f in files} == {PATH_A, PATH_B}

    reported = runner.invoke(app, ["report", str(run), "-o", str(toy_env / "report.html")])
    assert reported.exit_code == 0, reported.output
    html = (toy_env / "report.html").read_text()
    assert f'title="gold grader of this column">{STEM}</span>' in html
    assert "/root/.cache" not in html and STEM.upper() not in html

    # a run evaluated before: its result file named by the path's file name, the record holding the path
    for f in (run / "eval").glob("*-v*-smollm2*.json"):
        f.unlink()
    old = run / "eval" / f"test-v001-{STEM.lower()}.gguf-ours.json"
    old.write_text(json.dumps({**json.loads(as_json.stdout), "file": None}))
    again = runner.invoke(app, ["report", str(run), "-o", str(toy_env / "old.html")])
    assert again.exit_code == 0, again.output
    page = (toy_env / "old.html").read_text()
    assert "test 100.0 (v001)</span></summary>" in page and f"eval/{old.name}" in page
    assert f'title="gold grader of this column">{STEM}</span>' in page and "/root/.cache" not in page


FORGED = "toy\nerror: FORGED LINE\u202e"  # a grader name with a line break and a bidirectional override


def test_a_control_character_in_a_grader_name_is_shown_escaped() -> None:
    assert short_model_name(FORGED) == "toy\\nerror: FORGED LINE\\u202e"
    assert short_model_name(f"/models/a\tb.gguf, {FORGED}") == "a\\tb, toy\\nerror: FORGED LINE\\u202e"


def test_eval_prints_a_grader_name_with_a_line_break_on_one_line(toy_env: Path) -> None:
    """`eval --grader-model` given a name holding a newline printed it raw: the result line broke in two and
    the second half could pass for a message of decoevo's own."""
    server = FakeOpenAI(lambda body, n: toy_reply(body, n))  # answers any model name
    with serve_app(server.app()) as url:
        data = write_toy_questions(toy_env / "toy.jsonl")
        trained = runner.invoke(app, toy_run_args(f"{url}/v1", data, toy_env / "runs", "mine", steps=1))
        assert trained.exit_code == 0, trained.output
        graded = runner.invoke(app, ["eval", str(toy_env / "runs" / "mine"), "--split", "probe",
                                     "--grader-base-url", f"{url}/v1", "--grader-model", FORGED])
    assert graded.exit_code == 0, graded.output
    assert not any(line.lstrip().startswith("error: FORGED") for line in graded.output.splitlines()), graded.output
    assert "toy\\nerror: FORGED LINE\\u202e" in "".join(graded.output.split("\n")), graded.output
