"""Adversarial pass, round three (issue 21, "Done means"): cases no earlier pass covered, each a bug
found and fixed (docs/reliability.md, "Adversarial pass, round three")."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from decoevo.cli import app

runner = CliRunner()

PASSWORD = "pw-Tail7f3q9ZxK2m"  # its last characters are what pydantic's cut repr of the input used to show


@pytest.mark.parametrize(
    "args",
    [
        ["doctor", "--base-url", f"http://alice:{PASSWORD}@127.0.0.1:1/v1", "--model", "toy"],
        ["doctor", "--base-url", f"http://127.0.0.1:1/v1?key={PASSWORD}", "--model", "toy"],
        ["eval", "RUN", "--grader-base-url", f"http://alice:{PASSWORD}@127.0.0.1:1/v1"],
        ["align", "RUN", "--grader-base-url", f"http://alice:{PASSWORD}@127.0.0.1:1/v1"],
        ["reproduce", "OUT", "--base-url", f"http://alice:{PASSWORD}@127.0.0.1:1/v1", "--model", "toy", "-y"],
        [
            "reproduce",
            "OUT",
            "--grader-base-url",
            f"http://alice:{PASSWORD}@127.0.0.1:1/v1",
            "--grader-model",
            "t",
            "-y",
        ],
    ],
    ids=["doctor-password", "doctor-query", "eval-grader", "align-grader", "reproduce", "reproduce-grader"],
)
def test_a_server_address_with_credentials_is_one_line_that_quotes_no_part_of_them(
    args: list[str], tmp_path: Path
) -> None:
    """Before: a multi-line pydantic dump whose cut repr of the input ended in the password's tail
    (`'mo...K2m@127.0.0.1:1/v1'`); `reproduce` called it "internal error, a bug"."""
    args = [str(tmp_path / a) if a in ("RUN", "OUT") else a for a in args]
    result = runner.invoke(app, args)
    out = result.output
    assert result.exit_code == 2, out
    assert "credentials" in out or "query string" in " ".join(out.split())  # rich wraps at the console width
    assert "validation error" not in out and "internal error" not in out and "errors.pydantic.dev" not in out
    assert PASSWORD[-4:] not in "".join(out.split())  # not even the tail, across the terminal's wrapping
    assert not (tmp_path / "OUT").exists()


def test_a_sweep_into_a_directory_of_the_users_own_files_writes_nothing(tmp_path: Path) -> None:
    """Before: `decoevo sweep DIR` over a directory holding the user's status.json replaced it with the
    sweep's (and put sweep.yaml, .lock and runs/ among the user's files)."""
    target = tmp_path / "mine"
    target.mkdir()
    files = {"status.json": '{"my": "own"}\n', "notes.txt": "keep me\n", ".lock": "mine too\n"}
    for name, text in files.items():
        (target / name).write_text(text)
    result = runner.invoke(app, ["sweep", str(target), "--methods", "decoevo", "--seeds", "0"])
    assert result.exit_code == 2, result.output
    assert "not a sweep directory" in " ".join(result.output.split())
    assert sorted(p.name for p in target.iterdir()) == sorted(files)
    assert all((target / name).read_text() == text for name, text in files.items())


def _toy_world_server(delay: dict[str, float]) -> Any:
    from decoevo.testing import world
    from decoevo.testing.fake_openai import FakeOpenAI, Reply
    from decoevo.testing.toy_server import unwrap_repair

    def reply(body: dict[str, Any], n: int) -> Reply:
        messages = unwrap_repair(body["messages"])
        answer = world.respond(messages, world.schema_of(body), world.sample_index_of(body))
        return Reply(content=answer, delay_s=delay["s"])

    return FakeOpenAI(reply, models=("toy",))


def _kill_after(args: list[str], env: dict[str, str], server: Any, more: int) -> None:
    """Start `decoevo ARGS` and SIGKILL it once the server has received `more` further requests."""
    seen = len(server.requests)
    proc = subprocess.Popen(
        [sys.executable, "-m", "decoevo", *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 120
    while len(server.requests) < seen + more and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.002)
    assert proc.poll() is None, "it ended before the kill point"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.2)  # the server takes the last requests the kernel had sent


def _billed(calls: Path) -> tuple[int, int]:
    lines = [json.loads(line) for line in calls.read_text().splitlines()]
    paid = [c for c in lines if not c["cached"]]
    return len(paid), sum(1 for c in paid if c.get("estimated"))


@pytest.mark.slow  # ~18 s; tests/test_billed_everywhere.py kills eval and pilot three times each (a superset)
def test_an_evaluation_and_a_pilot_killed_with_requests_in_flight_count_every_request_received(
    tmp_path: Path,
) -> None:
    """Before: `decoevo eval` and `decoevo pilot` kept no record of a request before sending it; one killed
    at the default concurrency (64) had been billed for every request in flight, and their call logs
    counted only the answered ones. Now each paid request is recorded first (RUN/eval/requests.jsonl,
    OUT/pilot/requests.jsonl) and the next invocation completes the unanswered ones as estimated calls."""
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_run_args, write_toy_questions

    data = write_toy_questions(tmp_path / "toy.jsonl", n=24)
    delay = {"s": 0.0}
    server = _toy_world_server(delay)
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "cache.sqlite")}
    run = tmp_path / "runs" / "r"
    with serve_app(server.app()) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=1, sets=("splits.test=8",))
        done = subprocess.run([sys.executable, "-m", "decoevo", *args], env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stdout + done.stderr
        delay["s"] = 0.5  # every request of the evaluation is in flight for a while

        before = len(server.requests)
        _kill_after(["eval", str(run)], env, server, 4)
        finished = subprocess.run(
            [sys.executable, "-m", "decoevo", "eval", str(run)], env=env, capture_output=True, text=True, timeout=300
        )
        assert finished.returncode == 0, finished.stdout + finished.stderr
        received = len(server.requests) - before
        billed, estimated = _billed(run / "eval" / "calls.jsonl")
        assert billed >= received, f"eval: the server received {received} requests, eval/calls.jsonl bills {billed}"
        assert estimated > 0  # requests were in flight at the kill: not vacuous

        before = len(server.requests)
        pilot_args = [
            "pilot",
            str(tmp_path / "pilot"),
            "--base-url",
            f"{url}/v1",
            "--model",
            "toy",
            "--data",
            str(data),
            "--preset",
            "default",
            "--seeds",
            "3",
            "--set",
            "splits={pilot: 4, train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 0}",
        ]
        _kill_after(pilot_args, env, server, 3)
        finished = subprocess.run(
            [sys.executable, "-m", "decoevo", *pilot_args], env=env, capture_output=True, text=True, timeout=300
        )
        assert finished.returncode == 0, finished.stdout + finished.stderr
        received = len(server.requests) - before
        billed, estimated = _billed(tmp_path / "pilot" / "pilot" / "calls.jsonl")
        assert billed >= received, f"pilot: the server received {received} requests, its call log bills {billed}"
        assert estimated > 0


def test_reproduce_given_a_url_with_a_token_refuses_it_without_printing_the_token(tmp_path: Path) -> None:
    """Before: `reproduce --data healthbench=https://host/f.jsonl?token=T` read the URL as a path and
    printed it back with the token in "file not found" (its `//` collapsed, so no URL pattern matched)."""
    token = "tok-" + "9f8e7d6c5b4a3210fedc"
    url = f"https://mirror.example/data/hb.jsonl?token={token}"
    args = ["reproduce", str(tmp_path / "out"), "--base-url", "http://127.0.0.1:9/v1", "--model", "toy"]
    result = runner.invoke(app, [*args, "--allow-self-grading", "--data", f"healthbench={url}", "-y"])
    assert result.exit_code == 2, result.output
    assert "not URLs" in " ".join(result.output.split())
    assert token[-8:] not in "".join(result.output.split())
    assert not (tmp_path / "out").exists()


def test_a_data_url_with_user_and_password_downloads_with_basic_authorization(tmp_path: Path) -> None:
    """Before: urllib looked `alice:PW@127.0.0.1` up as a host name, so every `--data` URL (or mirror) with
    credentials failed as "cannot be reached ([Errno -2] Name or service not known); offline?"."""
    import base64

    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Route

    from decoevo.benchmarks.download import download
    from decoevo.testing.server import serve_app

    body = b'{"id": "q1", "prompt": "hi"}\n'
    wanted = "Basic " + base64.b64encode(b"alice:p@ss word").decode()

    async def data(request: Request) -> Response:
        if request.headers.get("authorization") != wanted:
            return Response("no", status_code=401)
        return Response(body, media_type="application/octet-stream")

    app = Starlette(routes=[Route("/q.jsonl", data)])
    with serve_app(app) as url:
        target = url.replace("://", "://alice:p%40ss%20word@") + "/q.jsonl"
        download(target, tmp_path / "q.jsonl", None)
    assert (tmp_path / "q.jsonl").read_bytes() == body


def test_the_api_resume_of_none_names_its_argument() -> None:
    """Before: `decoevo.resume(None)` raised os.fspath's TypeError ("expected str, bytes or os.PathLike
    object, not NoneType"), naming neither the function nor the argument; every other type was named."""
    import decoevo
    from decoevo.errors import ArgumentError

    with pytest.raises(ArgumentError, match="resume: run_dir"):
        decoevo.resume(None)  # type: ignore[arg-type]


FULL_DISK = """
import os, resource, signal, sys
from pathlib import Path
from decoevo.fileio import atomic_write_text
from decoevo.rundir.files import append_line
from decoevo.rundir.transcripts import TranscriptEntry, append_transcript
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (64, 64))
root = Path(sys.argv[1])
for name, write in (("summary.json", lambda p: atomic_write_text(p, "x" * 200)),
                    ("calls.jsonl", lambda p: append_line(root, p, "y" * 200)),
                    ("transcripts.jsonl.gz", lambda p: append_transcript(root, TranscriptEntry(
                        key="k", role="solve", model="m", reply=os.urandom(300).hex())))):
    try:
        write(root / name)
    except OSError as exc:
        print(name, exc.filename)
"""


def test_a_write_that_fails_names_its_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    """Before: a run on a full disk stopped with "error: No space left on device", naming no file, and an
    atomic write left its `.NAME.tmpPID` behind. The disk is made "full" with RLIMIT_FSIZE (no root)."""
    done = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == [
        f"summary.json {tmp_path / 'summary.json'}",
        f"calls.jsonl {tmp_path / 'calls.jsonl'}",
    ]
    assert not [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]
