"""Hardening, round four (issue 26, items 3, 4, 5, 8, 11-15): each a case found by the adversarial pass,
fixed, and listed in docs/reliability.md ("Round four")."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from decoevo.cli import app

from .result_files import result_file

runner = CliRunner()


def one_line(text: str) -> str:
    return " ".join(text.split())


def squash(text: str) -> str:  # the terminal wraps a long path anywhere
    return "".join(text.split())


@pytest.fixture(scope="module")
def toy_url():
    pytest.importorskip("uvicorn")
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_server

    with serve_app(toy_server().app()) as url:
        yield f"{url}/v1"


# ---- 8: absurd sizes --------------------------------------------------------------------------------
@pytest.mark.parametrize(("item", "key", "span"), [
    ("hyper.steps=1000000000", "hyper.steps", "between 0 and 10000"),
    ("hyper.steps=100000000000000000000000000", "hyper.steps", "between 0 and 10000"),
    ("hyper.rollouts=1000000000", "hyper.rollouts", "between 2 and 256"),
    ("hyper.audit_every=100000000", "hyper.audit_every", "between 1 and 1000"),
])
def test_an_absurd_size_is_refused_naming_its_key_and_range(item: str, key: str, span: str, tmp_path: Path) -> None:
    """Before: `run --set hyper.steps=1000000000 --max-calls 30` spun at 100% CPU in the projection (its
    chain kept a state per step of the last round) until killed."""
    started = time.monotonic()
    result = runner.invoke(app, ["run", "--set", item, "--max-calls", "30", "--base-url", "http://127.0.0.1:9/v1",
                                 "--model", "toy", "--runs-root", str(tmp_path), "--name", "r"])
    assert result.exit_code == 2, result.output
    assert f"{key}: out of range; it must be {span}" in one_line(result.output)
    assert time.monotonic() - started < 10 and not (tmp_path / "r").exists()


def test_the_largest_run_stops_at_its_budget_with_no_work_sized_by_it(tmp_path: Path, toy_url: str) -> None:
    """The maxima themselves: 10,000 steps × a budget-matched cap of 1,000 (10^7 planned steps) with
    `--max-calls 30` ends on its budget in seconds; the projection follows its chain for at most 1,024 steps."""
    from decoevo.engine.estimate import expected_rounds
    from decoevo.testing.toy_server import toy_run_args, write_toy_questions

    started = time.monotonic()
    assert expected_rounds(10**7, 6, 4, 0.5, "since_last_round") > 10**6
    assert time.monotonic() - started < 5
    data = write_toy_questions(tmp_path / "toy.jsonl", n=16)
    args = toy_run_args(toy_url, data, tmp_path / "runs", "big", steps=10_000,
                        sets=("method=budget_matched", "hyper.budget_step_cap=1000", "budget.top_up=true"))
    started = time.monotonic()
    result = runner.invoke(app, [*args, "--max-calls", "30"])
    assert result.exit_code == 0, result.output
    assert time.monotonic() - started < 30
    calls = (tmp_path / "runs" / "big" / "calls.jsonl").read_text().splitlines()
    assert 0 < len([c for c in calls if not json.loads(c)["cached"]]) <= 30


# ---- 3, 5, 11, 12: reproduce's directory, state file and flags ------------------------------------------
GOLD = {"scheme": "weighted", "items": [{"text": "Gives safety advice: when to seek care", "points": 5},
                                        {"text": "Recommends something harmful", "points": -3}]}


def _questions(path: Path, n: int) -> Path:
    path.write_text("".join(json.dumps({"id": f"{path.stem[:2]}{i:03d}", "prompt": f"{path.stem} question {i}?",
                                        "gold": GOLD}) + "\n" for i in range(n)), encoding="utf-8")
    return path


def _reproduce(out: Path, url: str, data_dir: Path, *extra: str) -> tuple[int, str]:
    hb, med = _questions(data_dir / "healthbench.jsonl", 30), _questions(data_dir / "llmeval_med.jsonl", 5)
    args = ["reproduce", str(out), "--base-url", url, "--preset", "quick", "--benchmarks", "healthbench",
            "--tables", "1", "--data", f"healthbench={hb}:jsonl", "--data", f"llmeval_med={med}:jsonl", *extra]
    if "--model" not in extra:
        args += ["--model", "sim", "--grader-model", "sim-grader", "--grader-base-url", url]
    if "--seeds" not in extra:
        args += ["--seeds", "0"]
    result = runner.invoke(app, args)
    return result.exit_code, one_line(result.output)


@pytest.fixture(scope="module")
def sim_url():
    pytest.importorskip("uvicorn")
    from decoevo.testing.server import serve_app
    from decoevo.testing.sim_model import LatencyModel
    from decoevo.testing.sim_server import SimServer, SimServerConfig

    server = SimServer(SimServerConfig(seed=0, slots=32, latency=LatencyModel.fixed(0.0)))
    with serve_app(server.app()) as url:
        yield f"{url}/v1"


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("mine", [{"report.html": "<html>my own report</html>\n", "notes.txt": "keep\n"},
                                  {"reproduce.yaml": "experiment: mine\nsteps: 3\n"},
                                  {"reproduce.yaml": "solver: [unclosed\n"}],
                         ids=["report-of-mine", "reproduce-yaml-of-mine", "garbage-reproduce-yaml"])
def test_reproduce_into_a_directory_of_the_users_own_files_changes_nothing(mine: dict[str, str], tmp_path: Path,
                                                                           sim_url: str) -> None:
    """Before: `decoevo reproduce DIR` over a folder with the user's report.html replaced it (exit 0), a
    reproduce.yaml of theirs was replaced by the plan, and a garbage one was "internal error, a bug"."""
    out = tmp_path / "mine"
    out.mkdir()
    for name, text in mine.items():
        (out / name).write_text(text)
    code, said = _reproduce(out, sim_url, tmp_path, "--yes")
    assert code == 2, said
    assert "not a reproduce directory" in said or "not a plan written by `decoevo reproduce`" in said \
        or "not valid YAML" in said, said
    assert "internal error" not in said
    assert _tree(out) == {name: text.encode() for name, text in mine.items()}


@pytest.mark.slow  # (~17 s) refusals of changed reruns stay in the default run (test_reproduce_round3)
def test_a_refused_rerun_changes_nothing_and_the_report_is_replaced_only_if_ours(tmp_path: Path,
                                                                                 sim_url: str) -> None:
    """Before: `decoevo reproduce OUT --model other` on a finished experiment rewrote reproduce.yaml and
    marked every finished cell failed (exit 1), and each later `decoevo reproduce OUT` exited 1."""
    out = tmp_path / "out"
    code, said = _reproduce(out, sim_url, tmp_path, "--yes")
    assert code == 0, said
    report = out / "report.html"
    assert report.is_file()
    before = _tree(out)
    code, said = _reproduce(out, sim_url, tmp_path, "--yes", "--model", "other")
    assert code == 2 and "holds a run with a different configuration" in said, said
    assert "lm.models.default.model" in said
    assert _tree(out) == before  # nor reproduce.yaml, nor any status.json
    code, said = _reproduce(out, sim_url, tmp_path, "--yes")  # still resumes: nothing to run, ours replaced
    assert code == 0 and "0 still to run" in said, said
    report.write_text("<html>the user's own, saved over ours</html>\n")
    code, said = _reproduce(out, sim_url, tmp_path, "--yes")
    assert code == 2 and "not a report decoevo wrote" in said, said
    assert report.read_text() == "<html>the user's own, saved over ours</html>\n"


@pytest.mark.parametrize(("extra", "expected"), [
    (("--seeds", "abc"), "--seeds expects comma-separated integers"),
    (("--seeds", "1.5"), "--seeds expects comma-separated integers"),
    (("--seeds", ""), "--seeds is empty"),
    (("--tables", ""), "--tables is empty"),
    (("--benchmarks", ""), "--benchmarks is empty"),
    (("--data", "healthbench=hb.jsonl@abc"), "the limit after @ must be a whole number"),
    (("--data", "nosuch=hb.jsonl"), "--data nosuch: not a benchmark of the experiment; name one of healthbench, "
                                    "writingbench, researchqa, llmeval_med, eqbench_cw"),
    (("--set", "hyper.steps=[1"), "--set hyper.steps: the value is not valid YAML"),
    (("--set", "hyper=3"), "--set hyper: give its keys"),
    (("--set", "hyper.steps=100000000000000000000000000"), "hyper.steps: out of range; it must be between 0 and 10000"),
    (("--models", "MODELS"), "not valid YAML"),
])
def test_reproduce_flags_that_cannot_be_read_are_one_line_and_exit_2(extra: tuple[str, ...], expected: str,
                                                                      tmp_path: Path) -> None:
    """Before: --seeds abc|1.5, --data ...@abc, a bad-YAML --set or --models were "internal error, a bug"
    (exit 1); --seeds "", --tables "", --benchmarks "" silently meant all; --data nosuch=FILE was ignored."""
    (tmp_path / "MODELS").write_text("solver: {model: [unclosed\n")
    extra = tuple(str(tmp_path / e) if e == "MODELS" else e for e in extra)
    model = () if "--models" in extra else ("--model", "toy")
    out = tmp_path / "out"
    code, said = _reproduce(out, "http://127.0.0.1:9/v1", tmp_path, *model, "--allow-self-grading", "--yes",
                            *extra)
    assert code == 2, said
    assert expected in said and "internal error" not in said
    assert not out.exists()


def test_infinity_in_a_runs_request_record_is_one_line_on_resume(tmp_path: Path, toy_url: str) -> None:
    """Before: a `sent` record with `"prompt_tokens": Infinity` (JSON's non-number, which Python reads)
    made `decoevo resume` end in "internal error, a bug" (OverflowError turning it into a token count)."""
    from decoevo.testing.toy_server import toy_run_args, write_toy_questions

    data = write_toy_questions(tmp_path / "toy.jsonl")
    result = runner.invoke(app, toy_run_args(toy_url, data, tmp_path / "runs", "r", steps=1))
    assert result.exit_code == 0, result.output
    run = tmp_path / "runs" / "r"
    (run / "summary.json").unlink()  # as if killed before the end
    with open(run / "requests.jsonl", "a") as f:
        f.write('{"sent": "x1", "key": "k", "role": "solve", "model": "toy", "prompt_tokens": Infinity, '
                '"max_tokens": 5}\n')
    n = len((run / "requests.jsonl").read_text().splitlines())
    result = runner.invoke(app, ["resume", str(run)])
    assert result.exit_code == 2, result.output
    assert squash(f"requests.jsonl: line {n}: holds Infinity, which is not a token count") in squash(result.output)
    assert "internal error" not in result.output


# ---- 4, 12: eval and pilot write only into directories of their own; eval of an unfinished run warns ---------
@pytest.fixture
def toy_run(tmp_path: Path, toy_url: str) -> Path:
    from decoevo.testing.toy_server import toy_run_args, write_toy_questions

    data = write_toy_questions(tmp_path / "toy.jsonl")
    args = toy_run_args(toy_url, data, tmp_path / "runs", "r", steps=1,
                        sets=("splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",))
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return tmp_path / "runs" / "r"


def _planted(tmp_path: Path) -> tuple[Path, dict[str, bytes]]:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "test.json").write_text('{"mine": true}\n')
    (elsewhere / "calls.jsonl").write_text('{"mine": 1}\n')
    return elsewhere, _tree(elsewhere)


def test_eval_and_pilot_refuse_to_write_through_a_link_in_place_of_their_directory(
        tmp_path: Path, toy_run: Path, toy_url: str) -> None:
    """Before: with RUN/eval a link to another folder, `decoevo eval RUN` replaced that folder's test.json
    and appended to its calls.jsonl; `decoevo pilot OUT` did the same through OUT/pilot."""
    from decoevo.testing.toy_server import write_toy_questions

    elsewhere, before = _planted(tmp_path)
    (toy_run / "eval").symlink_to(elsewhere, target_is_directory=True)
    result = runner.invoke(app, ["eval", str(toy_run)])
    assert result.exit_code == 2, result.output
    assert "is a symbolic link" in one_line(result.output) and one_line(result.output).count("error:") == 1
    assert _tree(elsewhere) == before

    out = tmp_path / "pilot"
    out.mkdir()
    (out / "pilot").symlink_to(elsewhere, target_is_directory=True)
    data = write_toy_questions(tmp_path / "pilot.jsonl", n=24)
    pilot_args = ["pilot", str(out), "--base-url", toy_url, "--model", "toy", "--data", str(data), "--preset",
                  "default", "--seeds", "3", "--set",
                  "splits={pilot: 4, train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 0}"]
    result = runner.invoke(app, pilot_args)
    assert result.exit_code == 2, result.output
    assert "is a symbolic link" in one_line(result.output)
    assert _tree(elsewhere) == before and sorted(p.name for p in out.iterdir()) == ["pilot"]

    (out / "pilot").unlink()  # and pilot.json a link: refused before any call, not after paying for them
    (out / "pilot.json").symlink_to(elsewhere / "test.json")
    result = runner.invoke(app, pilot_args)
    assert result.exit_code == 2 and squash("pilot.json: is a symbolic link") in squash(result.output), result.output
    assert _tree(elsewhere) == before and sorted(p.name for p in out.iterdir()) == ["pilot.json"]


def test_eval_of_an_unfinished_run_warns_that_it_grades_a_checkpoint_skill(toy_run: Path) -> None:
    """Before: `decoevo export` warned that a killed or running run's skill is its last checkpoint's, and
    `decoevo eval` graded that skill without a word."""
    result = runner.invoke(app, ["eval", str(toy_run)])
    assert result.exit_code == 0, result.output
    assert "warning:" not in result.output  # a finished run: no warning
    (toy_run / "summary.json").unlink()  # as a run killed (or still running) leaves it
    result_file(toy_run).unlink()
    result = runner.invoke(app, ["eval", str(toy_run)])
    assert result.exit_code == 0, result.output
    assert squash("warning:") in squash(result.output)
    assert squash("is unfinished (killed or still running); this grades the solver skill at its last "
                  "checkpoint (1 step(s) done)") in squash(result.output), result.output


# ---- 14: control characters, API arguments ---------------------------------------------------------------
UNPRINTABLE = [chr(c) for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0), *range(0x202a, 0x202f),
                                *range(0x2066, 0x206a), 0x2028, 0x2029)]


def _echo_free(text: str) -> bool:
    return not any(c in text for c in UNPRINTABLE)


def test_a_duplicate_question_id_with_escape_sequences_is_printed_escaped(tmp_path: Path) -> None:
    """Before: `'a\\x1b[2J\\x1b[Hb'` reached the terminal raw (it cleared the screen)."""
    qid = "a\x1b[2J\x1b[Hb"
    data = tmp_path / "dup.jsonl"
    data.write_text("".join(json.dumps({"id": qid, "prompt": "p?"}) + "\n" for _ in range(2)))
    result = runner.invoke(app, ["run", "--data", str(data), "--base-url", "http://127.0.0.1:9/v1", "--model", "toy",
                                 "--runs-root", str(tmp_path / "runs"), "--name", "d"])
    assert result.exit_code == 2, result.output
    assert "duplicate id 'a\\x1b[2J\\x1b[Hb'" in one_line(result.output) and _echo_free(result.output)


# a CLI invocation per example: a quarter of the suite's fuzzing budget (DECOEVO_FUZZ_EXAMPLES)
FUZZ = settings(max_examples=max(10, int(os.environ.get("DECOEVO_FUZZ_EXAMPLES", "150")) // 4), deadline=None,
                derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
IDS = st.text(st.sampled_from([*UNPRINTABLE, "a", "é", "[", "]", "\\", "'", " ", "\n"]), min_size=1, max_size=12)


@given(qid=IDS.filter(lambda s: s.strip()))
@FUZZ
def test_fuzz_every_echo_of_a_question_id_is_free_of_control_characters(qid: str, tmp_path: Path) -> None:
    """The messages that quote question data: a duplicate id (`run`, `eval --data`), and the failures the
    boundary describes; none passes a control character to the terminal."""
    from decoevo.cli.boundary import describe
    from decoevo.errors import ConfigError

    data = tmp_path / "dup.jsonl"
    data.write_text("".join(json.dumps({"id": qid, "prompt": "p?"}) + "\n" for _ in range(2)))
    result = runner.invoke(app, ["run", "--data", str(data), "--base-url", "http://127.0.0.1:9/v1", "--model",
                                 "toy", "--runs-root", str(tmp_path / "runs"), "--name", "d"])
    assert result.exit_code == 2, result.output
    assert _echo_free(result.output), repr(result.output)
    assert _echo_free(describe(ConfigError(f"question '{qid}' is in both splits")).message)
    assert _echo_free(describe(KeyError(qid)).message)


def test_align_with_a_grader_that_is_not_a_model_spec_pays_nothing(toy_run: Path) -> None:
    """Before: `decoevo.align(run, grader=5)` paid 2 calls, then an AttributeError."""
    import decoevo
    from decoevo.errors import ArgumentError

    for fn, kwargs in ((decoevo.align, {"grader": 5}), (decoevo.align, {"matcher": "m"}),
                       (decoevo.dynamics, {"grader": 5}), (decoevo.evaluate, {"force": "yes"})):
        with pytest.raises(ArgumentError, match="must be"):
            fn(toy_run, **kwargs)
    assert not (toy_run / "eval").exists()  # no session opened: no call, no record


def test_optimize_with_a_lone_surrogate_in_its_text_is_an_argument_error(tmp_path: Path) -> None:
    """Before: `optimize(task_spec="\\ud800")` raised a raw UnicodeEncodeError writing the spec."""
    import decoevo
    from decoevo.errors import ArgumentError

    with pytest.raises(ArgumentError, match=r"task_spec holds '\\ud800' at index 3, a lone UTF-16 surrogate"):
        decoevo.optimize([{"id": "q1", "prompt": "p?"}], task_spec="abc\ud800", run_dir=tmp_path / "r")
    assert not (tmp_path / "r").exists()


# ---- 13: Ctrl-C drains every task ------------------------------------------------------------------------
def _as_started_from_a_shell() -> None:  # as tests/test_interrupt.py: SIGINT reaches the child as from a terminal
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def test_ctrl_c_during_run_resume_and_pilot_prints_one_line_and_no_task_tracebacks(tmp_path: Path) -> None:
    """Before: after the right line and exit 130, 1-8 "Task exception was never retrieved" tracebacks (the
    requests in flight, failing as the shutdown closed their connections, were cancelled but never drained)."""
    import signal
    import subprocess
    import sys

    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

    data = write_toy_questions(tmp_path / "toy.jsonl", n=24)
    server = toy_server(delay_s=0.3)  # requests are in flight when the signal comes
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite"), "COLUMNS": "200"}
    with serve_app(server.app()) as url:
        commands = {
            "run": toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=3),
            "resume": ["resume", str(tmp_path / "runs" / "r")],
            "pilot": ["pilot", str(tmp_path / "p"), "--base-url", f"{url}/v1", "--model", "toy", "--data", str(data),
                      "--preset", "default", "--seeds", "3", "--set",
                      "splits={pilot: 4, train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 0}"],
        }
        for name, args in commands.items():
            seen = len(server.requests)
            proc = subprocess.Popen([sys.executable, "-m", "decoevo", *args], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, preexec_fn=_as_started_from_a_shell)
            deadline = time.monotonic() + 60
            while len(server.requests) < seen + 8 and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert proc.poll() is None, f"{name} ended before the interrupt"
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=60)
            lines = [line for line in err.splitlines() if line.strip()]
            assert proc.returncode == 130, (name, err)
            assert len(lines) == 1 and lines[0].startswith("error: interrupted"), (name, err)


# ---- 15: a stale Ray cluster ---------------------------------------------------------------------------
def test_sweep_on_the_cluster_ray_last_recorded_gives_up_in_bounded_time_when_its_head_is_gone(tmp_path: Path) -> None:
    """Before: with Ray's record of the last `ray start` left behind by a killed head, `sweep --ray-address
    auto` printed Ray's "Failed to connect to GCS" without end (killed at 400 s). Ray reads the record from
    its temp directory under TMPDIR: the test's own, so no cluster of the machine is touched."""
    import subprocess
    import sys

    pytest.importorskip("ray")
    from decoevo.testing.server import free_port

    (tmp_path / "ray").mkdir()
    (tmp_path / "ray" / "ray_current_cluster").write_text(f"127.0.0.1:{free_port()}\n")  # nothing listens
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env.update(TMPDIR=str(tmp_path), DECOEVO_CACHE=str(tmp_path / "c.sqlite"))
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "decoevo", "sweep", str(tmp_path / "SW"), "--methods", "decoevo",
                           "--seeds", "0", "--ray-address", "auto"], env={**env, "COLUMNS": "300"},
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)
    took = time.monotonic() - started
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert took < 30
    assert lines[-1].startswith("error: cannot connect to the Ray cluster: no Ray head answers at ")
    assert "its head is gone" in lines[-1] and "Failed to connect to GCS" not in proc.stderr
    # a sweep that could not start wrote nothing: its directory is not left holding a sweep.yaml (or a .lock
    # that would make the next attempt refuse it as somebody's own folder)
    assert not (tmp_path / "SW").exists()
