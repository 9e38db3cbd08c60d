"""Silent wrong behaviour (issue 12 items 7 and 9): input that used to be read as something else, or
to run nothing, or to place a run elsewhere, is refused with the file, line and field (or flag) named.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.benchmarks import load_jsonl_questions
from decoevo.benchmarks.healthbench.loader import load_healthbench
from decoevo.benchmarks.registry import BY_SCHEME
from decoevo.cli import app
from decoevo.domain import GoldItem
from decoevo.grading.result import ItemGrade
from decoevo.tasks.errors import DatasetError
from decoevo.testing.server import free_port
from decoevo.testing.toy_server import write_toy_questions

runner = CliRunner()


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))


def refused(path: Path, text: str, loader=load_jsonl_questions) -> DatasetError:
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError) as info:
        loader(path)
    return info.value


def line(**record) -> str:
    return json.dumps(record) + "\n"


# ---- ids ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad,shown", [(None, "null"), (True, "true"), ({"a": 1}, "an object"), ([1], "a list"),
                                       (1.5, "1.5"), ("  ", "an empty string")])
def test_ids_must_be_strings_or_integers(tmp_path, bad, shown):
    err = refused(tmp_path / "q.jsonl", line(id="a", prompt="x") + line(id=bad, prompt="y"))
    assert (err.line, err.field) == (2, "id") and shown in err.problem


def test_healthbench_prompt_id_null_is_refused(tmp_path):
    record = {"prompt_id": None, "prompt": [{"role": "user", "content": "hi"}],
              "rubrics": [{"criterion": "c", "points": 1}]}
    err = refused(tmp_path / "hb.jsonl", line(**record), load_healthbench)
    assert (err.line, err.field) == (1, "prompt_id") and "null" in err.problem


def test_integer_ids_still_load(tmp_path):
    path = tmp_path / "q.jsonl"
    path.write_text(line(id=7, prompt="x") + line(id="b", prompt="y"))
    assert [q.id for q in load_jsonl_questions(path)] == ["7", "b"]


# ---- gold items ----------------------------------------------------------------------------------------
def gold(items, scheme="weighted", **extra) -> str:
    return line(id="a", prompt="x", gold={"scheme": scheme, "items": items, **extra})


def test_weight_instead_of_points_is_refused_not_read_as_one_point(tmp_path):
    err = refused(tmp_path / "q.jsonl", gold([{"text": "t", "points": 2}, {"text": "u", "weight": 5}]))
    assert err.field == "gold.items[1].weight" and "unknown field" in err.problem and "points" in err.problem


def test_unknown_gold_field_is_refused(tmp_path):
    err = refused(tmp_path / "q.jsonl", gold([{"text": "t"}], rubric="x"))
    assert err.field == "gold.rubric"


def test_unknown_scheme_is_refused_at_load_naming_the_known_ones(tmp_path):
    err = refused(tmp_path / "q.jsonl", gold([{"text": "t"}], scheme="weighed"))
    assert err.field == "gold.scheme" and "'weighed'" in err.problem
    for scheme in BY_SCHEME:
        assert scheme in err.problem


@pytest.mark.parametrize("points", [1e308, -1e7, 1e6 + 1])
def test_points_out_of_range_are_refused(tmp_path, points):
    err = refused(tmp_path / "q.jsonl", gold([{"text": "t", "points": 2}, {"text": "u", "points": points}]))
    assert err.field == "gold.items[1].points" and "out of range" in err.problem


def test_healthbench_points_are_bounded_and_finite(tmp_path):
    base = {"prompt_id": "p", "prompt": [{"role": "user", "content": "hi"}]}
    for points in (1e308, "NaN"):
        text = json.dumps({**base, "rubrics": [{"criterion": "c", "points": 1}, {"criterion": "d", "points": 0}]})
        text = text.replace('"points": 0', f'"points": {points}')
        err = refused(tmp_path / "hb.jsonl", text + "\n", load_healthbench)
        assert err.field == "rubrics[1].points"


def test_a_fully_met_answer_never_scores_nan():
    """Points beyond float range (sums overflow to inf): no score (None), never NaN in a record."""
    from decoevo.benchmarks.custom.grader import _compute
    from decoevo.benchmarks.healthbench.rules import healthbench_fraction

    assert healthbench_fraction([1e308, 1e308], [True, True]) is None
    scored = [ItemGrade(index=i, criterion="c", points=1e308, value=1.0) for i in range(2)]
    score, _ = _compute(scored)
    assert score is None or math.isfinite(score)
    assert GoldItem(text="t", points=1e6).points == 1e6  # the bound itself loads


# ---- the command line: seeds, names, leftovers -----------------------------------------------------------
def invoke(args) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


def run_args(tmp_path: Path, *extra) -> list:
    data = write_toy_questions(tmp_path / "toy.jsonl")
    return ["run", "--data", data, "--base-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m",
            "--set", "lm.models.default.max_retries=0", "--runs-root", tmp_path / "runs", *extra]


@pytest.mark.parametrize("seeds,fragment", [("", "--seeds is empty"), (",", "--seeds is empty"),
                                            ("0,0", "lists a seed twice")])
def test_seeds_that_would_run_nothing_or_twice(tmp_path, seeds, fragment):
    code, output = invoke(run_args(tmp_path, "--seeds", seeds))
    assert code == 2 and fragment in output, output
    assert not (tmp_path / "runs").exists()


def test_name_with_several_seeds_is_refused_before_any_run(tmp_path):
    code, output = invoke(run_args(tmp_path, "--name", "X", "--seeds", "0,1"))
    assert code == 2 and "--name names one run directory" in output, output
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("name", ["../../X", "../X", "/abs", "a/b", ".hidden", "..", "x/../../y", "", "a\\b",
                                  "a" * 201])
def test_run_names_that_are_paths_are_refused(tmp_path, name):
    code, output = invoke(run_args(tmp_path, "--name", name))
    assert code == 2 and "--name" in output and "not a path" in output, output
    assert not (tmp_path / "X").exists() and not Path("/abs").exists()


def test_a_leftover_directory_without_config_is_not_overwritten(tmp_path):
    leftover = tmp_path / "runs" / "mine"
    leftover.mkdir(parents=True)
    (leftover / "notes.txt").write_text("keep me")
    code, output = invoke(run_args(tmp_path, "--name", "mine"))
    assert code == 2 and "is not a run directory" in output and "notes.txt" in output, output
    assert (leftover / "notes.txt").read_text() == "keep me"


def test_a_run_directory_that_is_a_symlink_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "linked").symlink_to(elsewhere)
    code, output = invoke(run_args(tmp_path, "--name", "linked"))
    assert code == 2 and "symbolic link" in " ".join(output.split()), output
    assert list(elsewhere.iterdir()) == []


# ---- sweep names become directories --------------------------------------------------------------------
@pytest.mark.parametrize("args,fragment", [
    (["--benchmark", "../x"], "'../x' is not a directory name"),
    (["--benchmark", "x/y"], "'x/y' is not a directory name"),
    (["--benchmark", "x\n"], "is not a directory name"),
    (["--benchmark", "a" * 150], "at most 100 characters"),
    (["--seeds", "1" + "0" * 30], "is out of range"),
])
def test_sweep_names_that_are_not_directory_names(tmp_path, args, fragment):
    data = write_toy_questions(tmp_path / "toy.jsonl")
    code, output = invoke(["sweep", tmp_path / "sw", "--data", data, "--base-url", "http://127.0.0.1:9/v1",
                           "--evaluate", "none", *args])
    assert code == 2 and fragment in output, output
    assert not (tmp_path / "x").exists() and not (tmp_path / "sw" / "runs").exists()


def test_sweep_benchmark_names_differing_only_in_case_are_one_directory(tmp_path):
    from decoevo.errors import ConfigError
    from decoevo.sweep.spec import spec_from_dict

    data = str(write_toy_questions(tmp_path / "toy.jsonl"))
    raw = {"methods": ["decoevo"], "seeds": [0], "benchmarks": [{"name": "HB", "data": data},
                                                                {"name": "hb", "data": data}]}
    with pytest.raises(ConfigError, match="listed twice"):
        spec_from_dict(raw, "s.yaml", tmp_path)
