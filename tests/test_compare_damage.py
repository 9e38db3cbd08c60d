"""Result and comparison files that are damaged, edited or not the run's own: the report names the file in
one warning and does not show its numbers as the run's ("Δ +nan", "the run's result 100.0" for a result
copied from another run, a 'before' mean over other questions than the Δ)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from decoevo.api import compare_async
from decoevo.cli import app
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

pytest.importorskip("uvicorn")
runner = CliRunner()
SPLITS = "splits={train: 4, probe: 2, solver_gate: 3, generator_gate: 3, test: 4}"
RESULT_BADGE = 'title="the run\'s result'


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Two toy runs of one method and seed (so only their ids tell them apart); the first graded and
    compared, the second not."""
    home = tmp_path_factory.mktemp("damage")
    with pytest.MonkeyPatch.context() as mp, serve_app(toy_server().app()) as url:
        mp.setenv("DECOEVO_CACHE", str(home / "cache.sqlite"))
        mp.chdir(home)
        data = write_toy_questions(home / "toy.jsonl")
        for name in ("first", "second"):
            trained = runner.invoke(app, toy_run_args(f"{url}/v1", data, home / "runs", name, steps=2,
                                                      sets=(SPLITS,)))
            assert trained.exit_code == 0, trained.output
        first = home / "runs" / "first"
        for command in (["eval", str(first)], ["compare", str(first)]):
            done = runner.invoke(app, command)
            assert done.exit_code == 0, done.output
        yield home


@pytest.fixture
def runs(made: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A copy of both runs for one test to damage (the data file beside them, as the config names it)."""
    monkeypatch.chdir(made)  # the runs' config names the data relative to here
    monkeypatch.setenv("COLUMNS", "2000")  # each warning on one line, its path unbroken
    shutil.copytree(made / "runs", tmp_path / "runs", symlinks=True)
    return tmp_path / "runs"


def _report(run: Path, out: Path) -> tuple[Result, str]:
    result = runner.invoke(app, ["report", str(run), "-o", str(out)])
    assert result.exit_code == 0, result.output
    return result, out.read_text(encoding="utf-8")


def _warnings(output: str) -> list[str]:
    return [" ".join(("warning:" + part).split()) for part in output.split("warning:")[1:]]


def _one_file(run: Path, pattern: str) -> Path:
    (found,) = list((run / "eval").glob(pattern))
    return found


def test_a_nan_in_a_comparison_names_the_file_and_shows_no_nan(runs: Path, tmp_path: Path) -> None:
    run = runs / "first"
    compared = _one_file(run, "compare-test-*.json")
    compared.write_text(re.sub(r'"mean_delta": [^,]+', '"mean_delta": NaN', compared.read_text()))
    graded = _one_file(run, "test-v001-*.json")
    graded.write_text(re.sub(r'"score": [\d.]+', '"score": NaN', graded.read_text(), count=1))
    result, page = _report(run, tmp_path / "r.html")
    warnings = _warnings(result.output)
    for damaged in (compared, graded):
        said = [w for w in warnings if damaged.name in w]
        assert len(said) == 1 and "not a number" in said[0] and "damaged" in said[0], warnings
    shown = re.sub(r"<li class=\"mono small\">[^<]*</li>", " ", page)  # the page's list of problems left out
    assert "nan" not in re.sub(r"<[^>]+>", " ", shown).lower().split()  # no "Δ +nan" anywhere
    assert "+nan" not in page.lower()


def test_means_over_other_questions_than_the_delta_are_refused(runs: Path, tmp_path: Path) -> None:
    """A 'before' mean that counts a question graded under one skill only contradicts the Δ."""
    run = runs / "first"
    compared = _one_file(run, "compare-test-*.json")
    record = json.loads(compared.read_text())
    rows = record["rows"]
    rows[0]["before"]["score"], rows[0]["after"]["score"], rows[0]["delta"] = 90.0, None, None  # graded before only
    paired = rows[1:]
    record["n_paired"] = 3  # the Δ is over the three paired questions, but the 'before' mean counts all four
    record["before_score"] = sum(r["before"]["score"] for r in rows) / 4
    record["after_score"] = sum(r["after"]["score"] for r in paired) / 3
    record["mean_delta"] = sum(r["delta"] for r in paired) / 3
    compared.write_text(json.dumps(record))
    result, page = _report(run, tmp_path / "r.html")
    said = [w for w in _warnings(result.output) if compared.name in w]
    assert len(said) == 1 and "same paired questions" in said[0], result.output
    assert f"{record['before_score']:.1f} →" not in page  # its contradictory 'before' mean is not shown


def test_a_grading_cut_short_is_warned_about(runs: Path, tmp_path: Path) -> None:
    run = runs / "first"
    graded = _one_file(run, "test-v001-*.json")
    record = json.loads(graded.read_text())
    record["items"] = record["items"][:3]  # the file lost a question
    graded.write_text(json.dumps(record))
    result, _ = _report(run, tmp_path / "r.html")
    said = [w for w in _warnings(result.output) if graded.name in w]
    assert len(said) == 1 and "cut short" in said[0], result.output
    record["n_graded"] = 3  # counted to match: still three of the split's four questions
    graded.write_text(json.dumps(record))
    result, _ = _report(run, tmp_path / "r2.html")
    said = [w for w in _warnings(result.output) if graded.name in w]
    assert len(said) == 1 and "3 of the 4 questions" in said[0] and "cut short" in said[0], result.output


def test_a_result_copied_from_another_run_is_not_that_runs_result(runs: Path, tmp_path: Path) -> None:
    first, second = runs / "first", runs / "second"
    _, own = _report(first, tmp_path / "first.html")
    assert RESULT_BADGE in own  # the first run's own grading is its result
    (second / "eval").mkdir(exist_ok=True)
    copied = [shutil.copy(p, second / "eval" / p.name) for p in (first / "eval").glob("*.json")
              if p.name.startswith(("test-", "compare-"))]
    assert len(copied) == 2
    result, page = _report(second, tmp_path / "second.html")
    warnings = _warnings(result.output)
    for path in copied:
        said = [w for w in warnings if Path(path).name in w]
        assert len(said) == 1 and "not this run's result" in said[0], warnings
    assert RESULT_BADGE not in page


def test_the_librarys_compare_ticks_each_question_and_names_each_edit_of_a_prompt(runs: Path, made: Path,
                                                                                 tmp_path: Path) -> None:
    """`compare_async`: `on_item` is called once a question (the CLI's progress), a one-question file is
    compared (what the user asked: the question's own text), and two edits of one prompt file are two
    comparisons, each named by the file's stem and recording its own text's hash, never one replacing the other."""
    first = runs / "first"
    ticks: list[str] = []
    one = asyncio.run(compare_async(first, data={"path": str(made / "toy.jsonl"), "format": "jsonl", "limit": 1},
                                    on_item=ticks.append))
    asked = json.loads((made / "toy.jsonl").read_text().splitlines()[0])
    assert one["n_questions"] == 1 and ticks == [asked["id"]]
    assert one["rows"][0]["question"] == asked["prompt"]
    # a file is a transfer (no split), the after side the shipped version
    assert one["kind"] == "transfer" and one["split"] is None and isinstance(one["after_version"], int)
    skill = tmp_path / "edited.md"
    files = []
    for text in ("Answer briefly.", "Answer briefly and kindly."):
        skill.write_text(text, encoding="utf-8")
        record = asyncio.run(compare_async(first, skill_file=skill))
        assert record["after_skill"]["sha256"] == hashlib.sha256(text.encode()).hexdigest()
        assert record["kind"] == "test" and record["after_version"] is None  # the run's split; a file, no version
        files.append(first / record["file"])
    assert files[0] != files[1] and all(f.is_file() and "edited" in f.name for f in files), files
    assert not record["after_same_as_before"]
    skill.write_text((first / "final_solver_skill.md").read_text(encoding="utf-8"), encoding="utf-8")
    assert asyncio.run(compare_async(first, skill_file=skill))["after_same_as_before"]  # the shipped skill itself
