"""The library API: the README's example runs as written (on the toy world over HTTP, and on the embedded
model), callbacks see the typed events the run directory records, and the API works from inside a running
event loop (a notebook)."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path

import pytest

import decoevo
from decoevo.errors import ConfigError
from decoevo.rundir import RunReader
from decoevo.rundir.records import EvalFile
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_server, write_toy_questions

from .result_files import has_result, result_file

README = Path(__file__).resolve().parents[1] / "README.md"
SERVER_LINE = 'lm = decoevo.ModelSpec(backend="openai", base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen3-8B")'


def readme_example() -> str:
    text = README.read_text(encoding="utf-8")
    match = re.search(r"<!-- api-example[^>]*-->\s*```python\n(.*?)```", text, re.DOTALL)
    assert match, "the README lost its API example"
    code = match.group(1)
    assert SERVER_LINE in code  # the test swaps this line for its own model
    return code


def run_example(code: str, where: Path) -> tuple[dict[str, object], str]:
    namespace: dict[str, object] = {"__name__": "readme_example"}
    out = io.StringIO()
    with contextlib.chdir(where), contextlib.redirect_stdout(out):
        exec(compile(code, "README.md", "exec"), namespace)
    return namespace, out.getvalue()


def test_the_readme_example_runs_on_the_toy_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    write_toy_questions(tmp_path / "my_questions.jsonl")
    with serve_app(toy_server().app()) as url:
        code = readme_example().replace(SERVER_LINE, f'lm = decoevo.ModelSpec(backend="openai", '
                                                     f'base_url="{url}/v1", model="toy")')
        namespace, printed = run_example(code, tmp_path)
    result = namespace["result"]
    run = tmp_path / "runs" / "from-python"
    assert result.run_dir == run and RunReader(run).status() == "finished"  # type: ignore[attr-defined]
    assert result.solver.text.strip() and result.solver.text.strip() in printed  # type: ignore[attr-defined]
    test = RunReader(run).model(EvalFile, result_file(run).relative_to(run).as_posix())
    assert test.n_graded > 0 and f"{test.score}" in printed
    (compared,) = RunReader(run).compare_names()  # decoevo.compare: the initial vs the shipped skill
    assert f"{RunReader(run).comparison(compared).mean_delta}" in printed
    accepted = [e for e in RunReader(run).events() if e.event == "inner_step" and e.accepted]
    assert printed.count("accepted") == len(accepted)  # the callback saw exactly the accepted steps
    assert (run / "questions.jsonl").is_file() and (run / "task_spec.txt").read_text().startswith("A good answer")


def test_callbacks_see_every_event_and_call(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    questions = [line for line in write_toy_questions(tmp_path / "q.jsonl").read_text().splitlines()]

    class Recorder:
        def __init__(self) -> None:
            self.events: list[str] = []
            self.calls = 0

        def on_event(self, event, state) -> None:  # type: ignore[no-untyped-def]
            self.events.append(event.event)

        def on_call(self, record) -> None:  # type: ignore[no-untyped-def]
            self.calls += 1

    import json

    recorder = Recorder()
    with serve_app(toy_server().app()) as url:
        lm = decoevo.ModelSpec(backend="openai", base_url=f"{url}/v1", model="toy")

        async def in_a_notebook() -> decoevo.RunResult:  # an event loop is already running here
            return decoevo.optimize([json.loads(q) for q in questions], lm=lm, preset="quick", callbacks=[recorder],
                                    hyper={"steps": 2})

        result = asyncio.run(in_a_notebook())
        again = decoevo.resume(result.run_dir)  # finished: nothing left to do, nothing paid
    run = result.run_dir
    assert recorder.events == [e.event for e in RunReader(run).events()]  # resuming a finished run adds nothing
    assert recorder.events[0] == "start" and recorder.events[-1] == "finish"
    assert recorder.calls == len(RunReader(run).calls()) > 10
    assert again.state == result.state and again.ledger.total().calls == result.ledger.total().calls
    assert str(run).startswith(str(Path(__import__("tempfile").gettempdir())))  # no run_dir: a temporary one


def test_bad_arguments_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no questions"):
        decoevo.optimize([])
    with pytest.raises(ConfigError, match="unknown preset"):
        decoevo.optimize([{"id": "a", "prompt": "x"}], preset="huge", run_dir=tmp_path / "r")
    assert not (tmp_path / "r" / "questions.jsonl").exists()  # nothing left behind that blocks a retry
    with pytest.raises(ConfigError, match="not a run directory"):
        decoevo.resume(tmp_path / "nowhere")


@pytest.mark.real_model
@pytest.mark.slow  # ~4-8 minutes on 2 cores: the quick preset's audits and a 4-question evaluation
def test_the_readme_example_runs_on_the_embedded_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same example, with the embedded default model (lm=None) and one inner step."""
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    write_toy_questions(tmp_path / "my_questions.jsonl", n=12)
    code = readme_example().replace(SERVER_LINE, "lm = None").replace(
        'preset="quick",', 'preset="quick", hyper={"steps": 1, "audit_every": 1},')
    namespace, printed = run_example(code, tmp_path)
    result = namespace["result"]
    run = tmp_path / "runs" / "from-python"
    assert RunReader(run).status() == "finished"
    assert {"inner_step", "outer_round", "finish"} <= {e.event for e in RunReader(run).events()}
    assert result.solver.text.strip() in printed  # type: ignore[attr-defined]
    assert has_result(run) or has_result(run, failed=True)


@pytest.mark.real_model
@pytest.mark.slow  # ~35 s; the default suite runs the API on the embedded model in every cell of
# tests/test_sweep_report_real.py (a cell is api.run_config_async with the default model) and in test_engine_real
def test_optimize_on_the_embedded_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The API end to end on the embedded model, sized to seconds: one SkillOpt step on two questions."""
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    import json

    questions = [json.loads(q) for q in write_toy_questions(tmp_path / "q.jsonl", n=3).read_text().splitlines()]
    seen: list[str] = []

    class Seen:
        def on_event(self, event, state) -> None:  # type: ignore[no-untyped-def]
            seen.append(event.event)

    result = decoevo.optimize(questions, method="skillopt", run_dir=tmp_path / "r", callbacks=[Seen()],
                              splits={"train": 1, "solver_gate": 1, "test": 1, "probe": 0, "generator_gate": 0,
                                      "diagnostic": 0, "pilot": 0},
                              hyper={"steps": 1, "batch_size": 1, "max_failures": 1, "max_criteria": 2,
                                     "max_tokens_solve": 48, "max_tokens_rubric": 160, "max_tokens_judge": 160,
                                     "max_tokens_rewrite": 200})
    assert seen[0] == "start" and seen[-1] == "finish" and ("inner_step" in seen or "inner_step_failed" in seen)
    assert RunReader(result.run_dir).status() == "finished" and result.ledger.total().calls > 0


def test_evaluate_names_a_bad_data_field_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    with serve_app(toy_server().app()) as url:
        lm = decoevo.ModelSpec(backend="openai", base_url=f"{url}/v1", model="toy")
        result = decoevo.optimize([{"id": f"q{i}", "prompt": "x"} for i in range(12)], lm=lm, preset="quick",
                                  hyper={"steps": 1}, run_dir=tmp_path / "r")
    with pytest.raises(ConfigError) as caught:
        decoevo.evaluate(result, data={"path": "x.jsonl", "limit": -1})
    assert "limit" in str(caught.value) and "\n" not in str(caught.value)
