"""Every benchmark's per-question score range is what `decoevo compare` writes, reads back and shows.

A HealthBench conversation's own score can be far below 0 (met negative-point criteria; the official rule
clips only the benchmark mean): `compare` refused its own file with "rows.5.before.score: Input should be
greater than or equal to 0". Here each benchmark's grader is driven to its extremes (a grader server that
gives every criterion its lowest verdict for the initial skill's answer and its highest for the shipped
one's) and the comparison goes through `decoevo compare`, back through the reader and into the report."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from decoevo.benchmarks.registry import BY_SCHEME
from decoevo.rundir import RunReader
from decoevo.rundir.records import CompareSide
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

pytest.importorskip("uvicorn")
runner = CliRunner()
SPLITS = "splits={train: 4, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}"


def _resolve(schema: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _resolve(root["$defs"][ref.rsplit("/", 1)[-1]], root)
    return schema


def extreme(schema: dict[str, Any], root: dict[str, Any], high: bool, criterion_points: float | None) -> Any:
    """The lowest (or highest) valid value of `schema`: enums at their ends, arrays at their length, a
    met/not-met verdict by what raises (or lowers) the score given the criterion's points."""
    schema = _resolve(schema, root)
    if "enum" in schema:
        return max(schema["enum"]) if high else min(schema["enum"])
    if "const" in schema:
        return schema["const"]
    kind = schema.get("type")
    if kind == "object":
        return {k: extreme(v, root, high, criterion_points) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        n = schema.get("minItems", 1)
        return [extreme(schema["items"], root, high, criterion_points) for _ in range(n)]
    if kind == "boolean":  # met: a positive criterion raises the score, a negative one lowers it
        positive = criterion_points is None or criterion_points > 0
        return positive if high else not positive
    if kind == "integer":
        return schema.get("maximum", 10) if high else schema.get("minimum", 0)
    return "as scripted"


def extreme_grader(body: dict[str, Any], n: int) -> Reply:
    """A gold grader at its extremes: highest for an answer with safety advice (the shipped skill's), lowest
    otherwise (the initial skill's)."""
    fmt = body.get("response_format") or {}
    schema = fmt["json_schema"]["schema"] if fmt.get("type") == "json_schema" else fmt.get("schema")
    user = str(body["messages"][-1]["content"])
    points = re.search(r"Criterion \(([+-]?[\d.]+) points\)", user)
    high = "safety" in user
    return Reply(content=json.dumps(extreme(schema, schema, high, float(points[1]) if points else None)))


def _question(qid: str, scheme: str, items: list[dict[str, Any]], meta: dict[str, Any] | None = None) -> str:
    return json.dumps({"id": qid, "prompt": f"Please help with case {qid}.", "meta": meta or {},
                       "gold": {"scheme": scheme, "items": items}})


# Each benchmark's questions (our JSONL with its gold scheme) and its grader's extremes for them: the lowest
# per-question score the initial skill's answers get, the highest the shipped skill's get.
CASES: dict[str, tuple[list[str], float, float]] = {
    "healthbench": ([_question("h1", "healthbench", [{"text": "Advises rest", "points": 1},
                                                     {"text": "Recommends antibiotics", "points": -10}]),
                     _question("h2", "healthbench", [{"text": "Suggests a doctor", "points": 5},
                                                     {"text": "Claims a cure", "points": -5}])], -1000.0, 100.0),
    "weighted": ([_question("w1", "weighted", [{"text": "Gives a plan", "points": 2},
                                               {"text": "Insults the user", "points": -8}]),
                  _question("w2", "weighted", [{"text": "Is concise", "points": 1}])], 0.0, 100.0),
    "writingbench": ([_question("wb1", "writingbench", [{"text": "Clear structure"}, {"text": "Vivid style"}]),
                      _question("wb2", "writingbench", [{"text": "Fits the brief"}])], 10.0, 100.0),
    "scholarqa_cs": ([_question("s1", "scholarqa_cs", [{"text": "Cites the main paper", "points": 2},
                                                       {"text": "Explains the method", "points": 1}]),
                      _question("s2", "scholarqa_cs", [{"text": "Compares baselines", "points": 1}])], 0.0, 100.0),
    "researchqa": ([_question("r1", "researchqa", [{"text": "Defines the term"}, {"text": "Gives evidence"}]),
                    _question("r2", "researchqa", [{"text": "Names limits"}])], 0.0, 100.0),
    "llmeval_med": ([_question("m1", "llmeval_med", [{"text": "States the dose"}],
                               {"reference_answer": "Take 1 g."}),
                     _question("m2", "llmeval_med", [{"text": "Warns about interactions"}],
                               {"reference_answer": "Avoid alcohol."})], 0.0, 100.0),
    "eqbench_cw": ([_question("e1", "eqbench_cw", [{"text": "Coherent", "extra": {"negative": False}},
                                                   {"text": "Elegant prose", "extra": {"negative": False}}]),
                    _question("e2", "eqbench_cw", [{"text": "Engaging", "extra": {"negative": False}}])],
                   0.0, 100.0),
}


def test_every_benchmark_is_covered() -> None:
    assert set(CASES) == set(BY_SCHEME)


@pytest.fixture(scope="module")
def toy_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One two-step toy run that shipped a rewritten skill (v001, the one with safety advice)."""
    home = tmp_path_factory.mktemp("ranges")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DECOEVO_CACHE", str(home / "cache.sqlite"))
        mp.chdir(home)
        with serve_app(toy_server().app()) as url:
            data = write_toy_questions(home / "toy.jsonl")
            trained = runner.invoke(app_(), toy_run_args(f"{url}/v1", data, home / "runs", "mine", steps=2,
                                                         sets=(SPLITS,)))
            assert trained.exit_code == 0, trained.output
            run = home / "runs" / "mine"
            assert json.loads((run / "summary.json").read_text())["solver_version"] == 1
            yield run  # served meanwhile: the run's own model answers the comparisons


def app_() -> Any:
    from decoevo.cli import app

    return app


@pytest.mark.parametrize("scheme", sorted(CASES))
def test_compare_holds_each_graders_extreme_questions(scheme: str, toy_run: Path, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    lines, low, high = CASES[scheme]
    monkeypatch.setenv("DECOEVO_CACHE", str(toy_run.parent.parent / "cache.sqlite"))
    monkeypatch.setenv("COLUMNS", "80")
    data = tmp_path / f"{scheme}.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with serve_app(FakeOpenAI(extreme_grader).app()) as grader:
        compared = runner.invoke(app_(), ["compare", str(toy_run), "--data", str(data), "--format", "jsonl",
                                          "--grader-base-url", f"{grader}/v1", "--grader-model", "extreme",
                                          "--grader-prompt", "ours"])
    assert compared.exit_code == 0, compared.output
    stem = next(s for s in RunReader(toy_run).compare_names() if s.startswith("compare-transfer-jsonl"))
    record = RunReader(toy_run).comparison(stem)  # read back through the model every reader uses
    assert record.benchmark == scheme and record.n_paired == len(lines)
    before = [r.before.score for r in record.rows]
    after = [r.after.score for r in record.rows]
    assert min(before) == pytest.approx(low) and max(after) == pytest.approx(high), (before, after)
    # the grader's range, as the benchmark declares it, holds what it gave, and the result model holds the range
    lo, hi = BY_SCHEME[scheme].question_range
    assert all(lo <= s <= hi for s in before + after)
    assert (lo == low or (math.isinf(lo) and low < 0)) and hi == high
    for bound in (lo if math.isfinite(lo) else -1e9, hi):
        CompareSide(score=bound)
    # the means and the Δ printed are over the same paired questions
    n = len(lines)
    assert record.before_score == pytest.approx(sum(before) / n)
    assert record.mean_delta == pytest.approx(sum(after) / n - sum(before) / n)
    said = " ".join(compared.output.split())
    assert f"{sum(before) / n:.1f}" in said and "error" not in said.lower()
