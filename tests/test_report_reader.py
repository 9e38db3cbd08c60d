"""The report reads a run directory only through `rundir.RunReader`: a malformed evaluation, dynamics,
alignment or audit file is a named problem carrying the reader's own message (file, line or field), in
the report's data and in its HTML; the rest of the run is still reported; and nothing under the run or
the sweep changes by a byte."""

from __future__ import annotations

import hashlib
import html as html_lib
import json
from pathlib import Path

import pytest

from decoevo.report import build_report, render, write
from decoevo.rundir import RunReader, RunReadError
from decoevo.rundir.files import read_jsonl

from .report_helpers import make_sweep, write_alignment, write_dynamics, write_eval


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def reader_message(read) -> str:
    with pytest.raises(RunReadError) as caught:
        read()
    return str(caught.value)


@pytest.fixture
def one_run(tmp_path: Path) -> tuple[Path, Path]:
    sweep = make_sweep(tmp_path, methods=("decoevo",), seeds=(0,), benchmarks=("healthbench",))
    return sweep, sweep / "runs" / "healthbench" / "decoevo-s0"


def test_malformed_eval_and_dynamics_files_are_named_problems_and_reading_writes_nothing(one_run, tmp_path):
    sweep, run = one_run
    write_eval(run, "test", "healthbench", "decoevo", 0, 61.0)
    write_eval(run, "llmeval_med", "llmeval_med", "decoevo", 0, 40.0)
    broken = json.loads((run / "eval" / "llmeval_med.json").read_text())
    del broken["n_graded"]
    (run / "eval" / "llmeval_med.json").write_text(json.dumps(broken))
    write_dynamics(run, "decoevo", 0)
    dynamics = json.loads((run / "eval" / "dynamics.json").read_text())
    dynamics["points"][0]["gold"] = 130.0  # off the 0-100 scale
    (run / "eval" / "dynamics.json").write_text(json.dumps(dynamics))
    write_alignment(run, "decoevo", 0, 0.4)
    (run / "eval" / "alignment.json").write_bytes(b"\xff" + (run / "eval" / "alignment.json").read_bytes())
    structural = run / "audits" / "outer_000" / "structural_probe.jsonl"
    structural.write_text(structural.read_text() + "[1, 2]\n")
    (sweep / "status.json").write_text('{"cells": ')
    before = digest(sweep)

    reader = RunReader(run)
    assert reader.eval_names() == ["llmeval_med", "test"]  # dynamics, alignment and ledgers are no gradings
    expected = [reader_message(lambda: reader.eval("llmeval_med")), reader_message(reader.dynamics),
                reader_message(reader.alignment), reader_message(lambda: reader.audit_round("audits/outer_000"))]
    assert expected == [
        f"{run}/eval/llmeval_med.json: field 'n_graded': Field required",
        f"{run}/eval/dynamics.json: field 'points.0.gold': Input should be less than or equal to 100",
        f"{run}/eval/alignment.json: not UTF-8 text (byte 0)",
        f"{structural}:{len(structural.read_text().splitlines())}: expected a JSON object",
    ]

    built = build_report([sweep])
    record = built.runs[0]
    assert sorted(record.problems) == sorted(expected)  # the reader's own messages, each once
    assert set(record.evals) == {"test"} and record.test_eval.score == 61.0  # the good file still counts
    assert record.dynamics is None and record.alignment is None and record.inner_gates
    assert built.sweeps[0].note.startswith(f"{sweep}/status.json: not valid JSON (line 1")  # the same parser
    page = html_lib.unescape(render(built))
    assert "problems while reading the runs" in page
    assert all(p in page for p in expected)
    write(built, tmp_path / "report.html")
    assert digest(sweep) == before  # reading, rendering and writing the report changed no byte of the sweep


def test_a_file_written_whole_keeps_its_last_line_and_a_log_drops_a_torn_one(tmp_path):
    whole = tmp_path / "records.jsonl"
    whole.write_text('{"a": 1}\n{"a": 2}')  # an atomic whole-file write: no tail can be torn
    assert read_jsonl(whole, log=False) == [{"a": 1}, {"a": 2}]
    assert read_jsonl(whole) == [{"a": 1}]  # a log's last line without its newline is a cut write
    assert read_jsonl(tmp_path / "absent.jsonl") == []
    whole.write_text('{"a": 1}\nnot json\n{"a": 3}\n')
    problems: list[str] = []
    assert read_jsonl(whole, problems) == [{"a": 1}, {"a": 3}]
    assert problems == [f"{whole}:2: not valid JSON (Expecting value: line 1 column 1 (char 0)); line skipped"]
