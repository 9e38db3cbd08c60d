"""The run directory's owner: reading never writes, one writer at a time, no write through a link, every
paid call in the ledger across kills, typed events, and runs of the previous format still read."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.lm import Budget, RequestCache
from decoevo.rundir import (
    FinishEvent,
    OtherEvent,
    RunLock,
    RunLocked,
    RunReader,
    RunWriter,
    UnsafeRunPath,
    make_event,
    parse_event,
    prepare_resume,
)
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, toy_server, write_toy_questions
from tests.engine_helpers import toy_engine

from .result_files import has_result

runner = CliRunner()
SPLITS = "splits={train: 5, probe: 2, solver_gate: 3, generator_gate: 3, diagnostic: 1, test: 2}"


def tree_digest(root: Path, skip: tuple[str, ...] = ("eval",)) -> dict[str, str]:
    """sha256 of every file under root (by relative path), except under the `skip` folders."""
    out = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if path.is_file() and rel.parts[0] not in skip:
            out[str(rel)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


@pytest.mark.parametrize("stop", ["finished", "budget"])
def test_eval_align_dynamics_export_report_never_change_a_byte(toy_env: Path, stop: str) -> None:
    with serve_app(toy_server().app()) as url:
        data = write_toy_questions(toy_env / "toy.jsonl")
        budget = ("--max-calls", "60") if stop == "budget" else ()
        result = runner.invoke(app, [*toy_run_args(f"{url}/v1", data, toy_env / "runs", "r", steps=3, sets=(SPLITS,)),
                                     *budget])
        assert result.exit_code == 0, result.output
        run = toy_env / "runs" / "r"
        reader = RunReader(run)
        assert reader.status() == ("budget_stop" if stop == "budget" else "finished")
        tail = [e.event for e in reader.events()][-2:]
        assert tail == (["budget_stop", "finish"] if stop == "budget" else ["outer_round", "finish"]) or \
            tail[-1] == "finish"
        before = tree_digest(run)
        grader = ["--grader-base-url", f"{url}/v1", "--grader-model", "toy"]
        for args in (["eval", str(run), *grader], ["dynamics", str(run), *grader], ["align", str(run), *grader],
                     ["export", str(run), "-o", str(toy_env / "skill.md")],
                     ["report", str(run), "-o", str(toy_env / "report.html")]):
            result = runner.invoke(app, args)
            assert result.exit_code == 0, (args, result.output)
            assert tree_digest(run) == before, f"`decoevo {args[0]}` changed the run directory"
    assert has_result(run) and (toy_env / "report.html").is_file()
    events = [e.event for e in RunReader(run).events()]
    assert events[-1] == "finish"  # the events after the last checkpoint are all still there
    if stop == "budget":
        assert "budget_stop" in events


def test_every_event_the_engine_writes_is_a_known_typed_event(tmp_path: Path) -> None:
    import asyncio

    engine, _ = toy_engine(tmp_path, "decoevo", steps=3)
    seen = []
    engine.observer = lambda event, state: seen.append(event)
    asyncio.run(engine.run_async())
    events = RunReader(engine.run.path).events()  # strict: any malformed line raises
    assert [e.event for e in events] == [e.event for e in seen]
    assert not any(isinstance(e, OtherEvent) for e in events)
    assert {"start", "inner_step", "outer_round", "finish"} <= {e.event for e in events}
    assert isinstance(events[-1], FinishEvent) and events[-1].method == "decoevo"
    summary = RunReader(engine.run.path).summary()
    assert summary is not None and summary.status == "finished" and summary.format_version == 2


def test_unknown_and_malformed_events() -> None:
    future = parse_event({"event": "rollout_drawn", "t": 1.0, "n": 3})
    assert isinstance(future, OtherEvent) and future.model_dump()["n"] == 3  # a newer writer's event reads
    with pytest.raises(ValueError, match="inner_step event, field 'accepted'"):
        make_event("inner_step", step=0, solver_version=0)
    with pytest.raises(ValueError, match="no 'event'"):
        parse_event(["not", "an", "event"])


def test_reader_skips_a_torn_tail_without_repairing_it(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path)
    writer.event("start", method="decoevo", seed=0)
    writer.checkpoint({"next_step": 0}, {})
    with open(tmp_path / "events.jsonl", "ab") as f:
        f.write(b'{"event": "inner_st')  # a kill mid-write
    size = (tmp_path / "events.jsonl").stat().st_size
    assert [e.event for e in RunReader(tmp_path).events()] == ["start"]
    assert (tmp_path / "events.jsonl").stat().st_size == size  # the reader repaired nothing
    prepare_resume(tmp_path)  # the resume loader is the one place that does
    assert (tmp_path / "events.jsonl").read_bytes().endswith(b"\n")
    assert [e.event for e in RunReader(tmp_path).events()] == ["start"]


# ---- one writer ---------------------------------------------------------------------------------------
def test_the_lock_is_exclusive_names_its_holder_and_is_released(tmp_path: Path) -> None:
    with RunLock(tmp_path / "r"), pytest.raises(RunLocked, match=f"in use by pid {os.getpid()}"):
        RunLock(tmp_path / "r").acquire()
    with RunLock(tmp_path / "r"):  # released on exit
        pass


def test_a_second_process_on_a_live_run_is_refused_and_a_kill_releases_it(toy_env: Path) -> None:
    """`decoevo run` in the background against a slow server; `decoevo resume` on the same directory is
    refused while it lives (naming its pid), and works once it was killed with SIGKILL."""
    # While the first process lives no answer comes back (it holds the run without ever finishing: with a short
    # delay, a loaded machine let it finish before the second process looked); the resume after its kill
    # gets answers at once. The held requests die with the server.
    delay = {"s": 3600.0}
    slow = FakeOpenAI(lambda body, n: Reply(content=toy_reply(body, n).content, delay_s=delay["s"]))
    data = write_toy_questions(toy_env / "toy.jsonl")
    run = toy_env / "runs" / "live"
    env = {**os.environ, "DECOEVO_CACHE": str(toy_env / "cache.sqlite")}
    with serve_app(slow.app()) as url:
        args = toy_run_args(f"{url}/v1", data, toy_env / "runs", "live", steps=3, sets=(SPLITS,))
        first = subprocess.Popen([sys.executable, "-m", "decoevo", *args], stdout=subprocess.DEVNULL,
                                 stderr=subprocess.DEVNULL, env=env)
        try:
            deadline = time.monotonic() + 60
            while not (run / "config.yaml").exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            assert (run / "config.yaml").exists()
            second = subprocess.run([sys.executable, "-m", "decoevo", "resume", str(run)], capture_output=True,
                                    text=True, timeout=60, env=env)
            assert second.returncode == 2, second.stdout + second.stderr
            assert f"in use by pid {first.pid}" in " ".join(second.stderr.split())
            assert "Traceback" not in second.stderr
            rerun = subprocess.run([sys.executable, "-m", "decoevo", *args], capture_output=True, text=True,
                                   timeout=60, env=env)
            assert rerun.returncode == 2 and "already holds a run" in " ".join(rerun.stderr.split())
        finally:
            first.send_signal(signal.SIGKILL)
            first.wait()
        delay["s"] = 0.0
        resumed = subprocess.run([sys.executable, "-m", "decoevo", "resume", str(run)], capture_output=True,
                                 text=True, timeout=300, env=env)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert RunReader(run).status() == "finished"


def test_no_write_goes_through_a_symlink(tmp_path: Path) -> None:
    import asyncio

    engine, _ = toy_engine(tmp_path, "skillopt", run_name="run")
    asyncio.run(engine.run_async())
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    events = tmp_path / "run" / "events.jsonl"
    events.unlink()
    events.symlink_to(outside)
    with pytest.raises(UnsafeRunPath, match="symbolic link"):
        prepare_resume(tmp_path / "run")
    with pytest.raises(UnsafeRunPath):
        RunWriter(tmp_path / "run").event("resume", next_step=1)
    assert outside.read_text() == "keep me\n"
    # a whole-file write replaces the link itself, never the file it points to
    (tmp_path / "run" / "ledger.json").unlink()
    (tmp_path / "run" / "ledger.json").symlink_to(outside)
    with pytest.raises(UnsafeRunPath):
        RunWriter(tmp_path / "run").write_json("ledger.json", {})
    assert outside.read_text() == "keep me\n"


# ---- every paid call counted --------------------------------------------------------------------------
class Kill(BaseException):
    """Stands for a SIGKILL: raised from inside the run, caught by nothing in it."""


@pytest.mark.parametrize("budget", [None, 45])
def test_repeated_kills_and_resumes_count_every_paid_call_once(tmp_path: Path, budget: int | None) -> None:
    """Killed after about every 3rd paid call and resumed, over and over: the final ledger's paid calls equal the
    distinct paid requests in calls.jsonl, the same as an uninterrupted run's; a call budget holds."""
    import asyncio

    extra = {} if budget is None else {"budget": budget}
    reference, _ = toy_engine(tmp_path, "decoevo", run_name="ref", cache=RequestCache(tmp_path / "ref.sqlite"),
                              steps=3)
    if budget is not None:
        reference.lm.budget = Budget(max_calls=budget)
    ref = asyncio.run(reference.run_async())
    cache = RequestCache(tmp_path / "shared.sqlite")
    kills = 0
    while True:
        engine, _ = toy_engine(tmp_path, "decoevo", run_name="killed", cache=cache, steps=3)
        if extra:
            engine.lm.budget = Budget(max_calls=budget)
        paid = [0]

        def on_call(record, paid=paid):
            paid[0] += not record.cached
            if paid[0] == 3:  # siblings already in flight still finish: a process pays a few more
                raise Kill

        engine.on_call = on_call
        try:
            result = asyncio.run(engine.run_async(resume=kills > 0))
            break
        except Kill:
            kills += 1
            assert kills < 60
    calls = RunReader(tmp_path / "killed").calls()
    paid_keys = [c.key for c in calls if not c.cached]
    assert kills >= 3
    assert len(paid_keys) == len(set(paid_keys))  # nothing paid twice
    total = result.ledger.total()
    assert total.calls == len(paid_keys) == ref.ledger.total().calls
    ledger_file = json.loads((tmp_path / "killed" / "ledger.json").read_text())
    assert ledger_file["total"]["calls"] == len(paid_keys)
    if budget is not None:
        assert result.state.stopped and total.calls <= budget + 4  # + requests already in flight (concurrency 4)


def test_a_run_of_the_previous_format_still_reads_and_resumes(tmp_path: Path) -> None:
    import asyncio

    engine, _ = toy_engine(tmp_path, "skillopt", run_name="old", steps=2)
    result = asyncio.run(engine.run_async())
    run = tmp_path / "old"

    def engine_state_solver(_: Path):
        return result.state.solver

    checkpoint = json.loads((run / "checkpoint.json").read_text())
    for key in ("calls_offset", "format_version"):
        checkpoint.pop(key)
    (run / "checkpoint.json").write_text(json.dumps(checkpoint))
    summary = json.loads((run / "summary.json").read_text())
    for key in ("status", "format_version"):
        summary.pop(key)
    (run / "summary.json").write_text(json.dumps(summary))
    reader = RunReader(run)
    assert reader.status() == "finished" and reader.checkpoint().format_version == 1
    assert reader.final_skill("solver") == engine_state_solver(run)
    point = prepare_resume(run)
    assert point.paid_after == () and point.own_keys  # format 1: every logged call is the run's own


# ---- transcripts: a run is readable without the shared cache -------------------------------------------
def test_every_request_is_transcribed_in_the_run_and_the_report_links_gates_to_them(tmp_path: Path) -> None:
    import asyncio
    import shutil

    from decoevo.report import build_report
    from decoevo.report.render import render

    engine, _ = toy_engine(tmp_path, "decoevo", run_name="orig", steps=2)
    asyncio.run(engine.run_async())
    copy = tmp_path / "elsewhere" / "run"
    shutil.copytree(tmp_path / "orig", copy)  # no cache goes with it
    (tmp_path / "cache.sqlite").unlink()
    reader = RunReader(copy)
    entries = {t.key: t for t in reader.transcripts()}
    calls = reader.calls()
    assert {c.key for c in calls} == set(entries)  # every distinct request of the run, and nothing else
    assert all(e.messages and e.reply for e in entries.values())
    phases = {c.phase for c in calls}
    assert {"step 0", "step 1", "outer 0"} <= phases
    assert {entries[c.key].phase for c in calls if not c.cached} <= phases
    html = render(build_report([copy]))
    assert '-tx-step-0">' in html and '-tx-outer-0">' in html  # the transcript sections
    assert html.count('-tx-step-0"') >= 2  # and the gate table's link to one
    # a kill mid-append tears only the last member: the reader keeps the others
    with open(copy / "transcripts.jsonl.gz", "ab") as f:
        f.write(b"\x1f\x8b\x08\x00garbage")
    assert len(RunReader(copy).transcripts()) == len(entries)


def test_reading_transcripts_is_linear_in_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A paper-scale run has thousands of entries; `decoevo report` over a sweep reads every run's. The
    reader gave the decompressor the whole rest of the file for each entry (and appended each to one
    growing bytes object): 18.9 s for a 4,569-entry run, 0.26 s now. Each compressed byte must be fed
    to the decompressor a bounded number of times."""
    import random
    import zlib

    from decoevo.rundir import transcripts as tx

    rng = random.Random(0)
    words = [f"w{i}" for i in range(500)]
    n = 1000
    for i in range(n):  # entries of a real one's size: about 1.5 KB compressed
        text = " ".join(rng.choices(words, k=600))
        tx.append_transcript(tmp_path, tx.TranscriptEntry(key=f"k{i}", role="answer", model="m", phase="step 0",
                                                          messages=[{"role": "user", "content": text[:2000]}],
                                                          reply=text[2000:]))
    size = (tmp_path / tx.TRANSCRIPTS).stat().st_size
    fed, original = 0, zlib.decompressobj

    class Counting:
        def __init__(self, *args: int, **kwargs: int) -> None:
            self._d = original(*args, **kwargs)

        def decompress(self, data: bytes) -> bytes:
            nonlocal fed
            fed += len(data)
            return self._d.decompress(data)

        def __getattr__(self, name: str) -> object:
            return getattr(self._d, name)

    monkeypatch.setattr(tx.zlib, "decompressobj", Counting)
    entries = tx.read_transcripts(tmp_path / tx.TRANSCRIPTS)
    assert [e.key for e in entries] == [f"k{i}" for i in range(n)]
    # the file once, plus at most a bounded piece again per entry; the old reader fed about n/2 × size
    assert fed <= size + n * 8192, (fed, size)


# ---- the mutation bench's survivors in rundir/writer.py (docs/reliability.md "Mutation bench") ---------------

def test_a_candidate_not_kept_is_still_on_disk_to_read(tmp_path: Path) -> None:
    from decoevo.domain import Skill

    RunWriter(tmp_path / "run").save_candidate(Skill(kind="solver", version=2, text="Answer in one line."), "step3")
    saved = (tmp_path / "run" / "candidates" / "solver_step3.md").read_text()
    assert "Answer in one line." in saved


def test_a_checkpoint_writes_the_ledger_it_counts(tmp_path: Path) -> None:
    """ledger.json is what `report --watch` and a killed run's reader show; it must be the checkpoint's."""
    ledger = {"rows": [{"role": "solve", "calls": 3}]}
    writer = RunWriter(tmp_path / "run")
    writer.checkpoint({"step": 1}, ledger)
    assert json.loads((tmp_path / "run" / "ledger.json").read_text()) == ledger
    assert json.loads((tmp_path / "run" / "checkpoint.json").read_text())["ledger"] == ledger
