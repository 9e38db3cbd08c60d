"""No traceback on any input (issue 12 item 6): each class of bad input, bad state or bad reply ends with
one line that names what to fix and exit 2, and a `stopped` event where a run was going.

Most cases run in-process (typer's runner); those whose behaviour is at the process boundary (the
environment, the file system, stderr) run real `decoevo` processes. Reply-side cases talk to scripted
servers on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.testing.fake_openai import FakeOpenAI, Reply, chat_body
from decoevo.testing.server import free_port, serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, toy_server, write_toy_questions

pytest.importorskip("uvicorn")
runner = CliRunner()


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.delenv("DECOEVO_DEBUG", raising=False)


def one_line_error(code: int, output: str, *fragments: str) -> str:
    """Exit 2, no traceback, one `error:` paragraph holding every fragment (whitespace-insensitive)."""
    assert code == 2, output
    assert "Traceback" not in output, output
    message = output[output.index("error:"):].strip()
    assert "\n\n" not in message, output
    flat = "".join(message.split())
    for fragment in fragments:
        assert "".join(fragment.split()) in flat, f"{fragment!r} not in:\n{output}"
    return message


def invoke(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args], env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"uncaught {result.exception!r}\n{result.output}") from result.exception
    return result.exit_code, result.output


def decoevo(args: list[str], env_extra: dict[str, str] | None = None, cwd: Path | None = None):
    env = {**os.environ, **(env_extra or {})}
    env.pop("DECOEVO_DEBUG", None)
    return subprocess.run([sys.executable, "-m", "decoevo", *map(str, args)], env=env, cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def dead(tmp_path: Path) -> list[str]:
    return ["--base-url", f"http://127.0.0.1:{free_port()}/v1", "--model", "m", "--preset", "quick",
            "--set", "lm.models.default.max_retries=0", "--runs-root", str(tmp_path / "runs")]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("done")
    data = write_toy_questions(root / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        code, output = invoke([*toy_run_args(f"{url}/v1", data, root, "done", steps=1), "--no-cache"])
    assert code == 0, output
    return root / "done"


@pytest.fixture
def run_copy(tmp_path, finished_run) -> Path:
    run = tmp_path / "run"
    shutil.copytree(finished_run, run)
    return run


# ---- --set ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("sets,fragments", [
    (["hyper.steps=[1"], ["--set hyper.steps", "not valid YAML", "quote it"]),
    (["hyper.steps=\t"], ["--set hyper.steps", "not valid YAML"]),
    (["a=3", "a.b=1"], ["--set a.b", "'a' was already given the value 3"]),
    (["hyper=3", "hyper.steps=1"], ["--set hyper.steps", "'hyper' was already given"]),
    (["=3"], ["the key must be dotted names"]),
    (["hyper..steps=3"], ["the key must be dotted names", "hyper..steps"]),
    (["hyper.steps=" + "[" * 2000 + "]" * 2000], ["hyper.steps"]),
    (['initial_solver_skill="Be brief \\ud800"'], ["initial_solver_skill", "lone UTF-16 surrogate"]),
    # (not lm.models.default.model: `dead` gives --model, and a --set of the same key must agree with it)
    (['lm.models.default.api_key_env="K\\udfff"'], ["lm.models.default.api_key_env", "lone UTF-16 surrogate"]),
])
def test_bad_set(tmp_path, sets, fragments):
    data = write_toy_questions(tmp_path / "toy.jsonl")
    args = ["run", "--data", data, *dead(tmp_path)]
    for item in sets:
        args += ["--set", item]
    one_line_error(*invoke(args), *fragments)


def test_sweep_bad_set_and_sweep_dir_that_is_a_file(tmp_path):
    data = write_toy_questions(tmp_path / "toy.jsonl")
    one_line_error(*invoke(["sweep", tmp_path / "sw", "--data", data, "--set", "hyper.steps=[1"]), "not valid YAML")
    (tmp_path / "f").write_text("x")
    one_line_error(*invoke(["sweep", tmp_path / "f", "--data", data]), "is not a directory")


# ---- files the user names ---------------------------------------------------------------------------
@pytest.mark.parametrize("name,content,flag,fragments", [
    ("c.yaml", b"method: decoevo\n# caf\xe9\n", "--config", ["{p}, line 2", "not valid UTF-8"]),
    ("c.yaml", ("[" * 100_000).encode(), "--config", ["{p}", "nested too deeply"]),
    ("spec.txt", b"spec caf\xe9\n", "--task-spec", ["{p}, line 1", "not valid UTF-8"]),
])
def test_unreadable_user_file(tmp_path, name, content, flag, fragments):
    data = write_toy_questions(tmp_path / "toy.jsonl")
    path = tmp_path / name
    path.write_bytes(content)
    code, output = invoke(["run", "--data", data, flag, path, *dead(tmp_path)])
    one_line_error(code, output, *[f.replace("{p}", str(path)) for f in fragments])


def test_config_with_a_bom_is_read(tmp_path):
    data = write_toy_questions(tmp_path / "toy.jsonl")
    config = tmp_path / "c.yaml"
    config.write_text("\ufeffhyper:\n  stepz: 1\n", encoding="utf-8")  # the BOM is not part of the key
    one_line_error(*invoke(["run", "--data", data, "--config", config, *dead(tmp_path)]), "hyper.stepz: unknown key")


def test_key_file_not_utf8_is_named_without_its_content(tmp_path):
    data = write_toy_questions(tmp_path / "toy.jsonl")
    key = tmp_path / "key.txt"
    key.write_bytes(b"sk-secret\xff\xfe\n")
    code, output = invoke(["run", "--data", data, "--set", f"lm.models.default.api_key_file={key}", *dead(tmp_path)])
    one_line_error(code, output, f"lm.models.default.api_key_file {key}", "not valid UTF-8")
    assert "sk-secret" not in output


def test_process_boundary_cases(tmp_path):
    """Real processes: the environment (DECOEVO_CACHE a directory), runs-root a file or unwritable,
    a non-UTF-8 config: stderr has one `error:` line's paragraph and no traceback; exit 2."""
    data = write_toy_questions(tmp_path / "toy.jsonl")
    base = ["run", "--data", data, *dead(tmp_path)[:-2]]
    (tmp_path / "cachedir").mkdir()
    (tmp_path / "file").write_text("x")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    bad_config = tmp_path / "bad.yaml"
    bad_config.write_bytes(b"\xff\xfe")
    cases = [
        ([*base, "--runs-root", tmp_path / "r1"], {"DECOEVO_CACHE": str(tmp_path / "cachedir")},
         ["request cache", "is a directory", "--no-cache"]),
        ([*base, "--runs-root", tmp_path / "file"], {}, ["--runs-root", "is a file"]),
        ([*base, "--runs-root", tmp_path / "r2", "--config", bad_config], {}, [str(bad_config), "UTF-8"]),
    ]
    if os.geteuid() != 0:  # root writes anywhere
        cases.append(([*base, "--runs-root", ro / "runs"], {}, [str(ro / "runs"), "Permission denied"]))
    for args, env, fragments in cases:
        done = decoevo(args, {"DECOEVO_CACHE": str(tmp_path / "c.sqlite"), **env})
        one_line_error(done.returncode, done.stderr, *fragments)
        assert "Traceback" not in done.stdout + done.stderr


# ---- a run directory's own files ----------------------------------------------------------------------
CHECKPOINTS = [("truncated", '{"state": {'), ("empty-object", "{}"), ("a-list", "[]"),
               ("wrong-types", '{"state": 3, "ledger": [], "events_offset": "x"}'), ("not-utf8", b"\xff\xfe"),
               ("nested-100k", "[" * 100_000 + "]" * 100_000)]


@pytest.mark.parametrize("content", [c[1] for c in CHECKPOINTS], ids=[c[0] for c in CHECKPOINTS])
@pytest.mark.parametrize("command", ["resume", "export", "eval", "align"])  # dynamics reads skills/, not it
def test_broken_checkpoint(run_copy, command, content):
    path = run_copy / "checkpoint.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    one_line_error(*invoke([command, run_copy]), str(path))


def test_garbage_line_in_the_call_log(run_copy):
    calls = run_copy / "calls.jsonl"
    lines = calls.read_text().splitlines(True)
    calls.write_text("".join([lines[0], "{garbage\n", *lines[1:]]))
    code, output = invoke(["eval", run_copy])
    assert "Traceback" not in output and code in (0, 1, 2), output
    code, output = invoke(["export", run_copy])
    assert code == 0, output


def test_run_dir_that_is_a_file_or_a_link(tmp_path, run_copy):
    (tmp_path / "f").write_text("x")
    for command in ("resume", "export", "eval", "dynamics", "align"):
        one_line_error(*invoke([command, tmp_path / "f"]), str(tmp_path / "f"))
    one_line_error(*invoke(["report", tmp_path / "f", "-o", tmp_path / "r.html"]), str(tmp_path / "f"))
    link = tmp_path / "link"
    link.symlink_to(run_copy)
    before = (run_copy / "events.jsonl").read_bytes()
    one_line_error(*invoke(["resume", link]), str(link), "symbolic link", str(run_copy))
    assert (run_copy / "events.jsonl").read_bytes() == before


def test_output_paths(tmp_path, run_copy):
    (tmp_path / "f").write_text("x")
    for command in (["export", run_copy], ["report", run_copy]):
        one_line_error(*invoke([*command, "-o", tmp_path]), f"-o {tmp_path}", "is a directory")
        one_line_error(*invoke([*command, "-o", tmp_path / "f" / "out"]), f"-o {tmp_path / 'f' / 'out'}")
        code, output = invoke([*command, "-o", tmp_path / "new" / "dir" / "out.txt"])  # a missing directory is made
        assert code == 0 and (tmp_path / "new" / "dir" / "out.txt").stat().st_size > 0, output
        shutil.rmtree(tmp_path / "new")


def test_question_with_a_lone_surrogate(tmp_path):
    data = tmp_path / "q.jsonl"
    data.write_text('{"id": "a", "prompt": "ok"}\n{"id": "b", "prompt": [{"role": "user", "content": "x\\ud800"}]}\n')
    one_line_error(*invoke(["run", "--data", data, *dead(tmp_path)]), f"{data}, line 2, field 'prompt[0].content'",
                   "surrogate")


def test_an_unexpected_error_is_one_line_and_says_it_is_a_bug(monkeypatch):
    import decoevo.methods

    def boom() -> None:
        raise KeyError("x")

    monkeypatch.setattr(decoevo.methods, "METHODS", type("M", (), {"values": staticmethod(boom)})())
    result = runner.invoke(app, ["methods"])
    assert result.exit_code == 1 and "internal error" in result.output and "DECOEVO_DEBUG" in result.output
    assert "Traceback" not in result.output


# ---- replies --------------------------------------------------------------------------------------------
def run_against(tmp_path: Path, name: str, mutate, extra: tuple[str, ...] = ("--no-cache",)
                ) -> tuple[int, str, list[dict]]:
    """A toy run whose 6th reply is rewritten by `mutate(body_text)`; returns the exit, output, events."""
    data = write_toy_questions(tmp_path / "toy.jsonl")

    def responder(body, n):
        reply = toy_reply(body, n)
        return Reply(raw_body=mutate(chat_body(reply.content, "toy"))) if n == 5 else reply

    with serve_app(FakeOpenAI(responder).app()) as url:
        code, output = invoke([*toy_run_args(f"{url}/v1", data, tmp_path, name, steps=1,
                                             sets=("lm.models.default.max_retries=0",)), *extra])
    events = [json.loads(line) for line in (tmp_path / name / "events.jsonl").read_text().splitlines()]
    return code, output, events


def usage_of(value: str):
    return lambda body: body.replace('"completion_tokens": ', f'"completion_tokens": {value}, "was": ', 1)


@pytest.mark.parametrize("value", ["Infinity", "NaN", "-1000000000", "1.5", '"12"', "1e30"])
def test_unusable_usage_stops_the_run(tmp_path, value):
    code, output, events = run_against(tmp_path, "u", usage_of(value), ("--no-cache", "--max-tokens", "100000"))
    one_line_error(code, output, "usage.completion_tokens", "decoevo resume")
    assert events[-1]["event"] == "stopped" and "usage.completion_tokens" in events[-1]["error"]


def test_negative_usage_no_longer_bypasses_max_tokens(tmp_path):
    """Every reply claims -10^9 completion tokens: the budget would never be reached; now the first
    such reply stops the run."""
    data = write_toy_questions(tmp_path / "toy.jsonl")
    server = FakeOpenAI(lambda body, n: Reply(raw_body=chat_body(toy_reply(body, n).content, "toy",
                                                                 completion_tokens=-10**9)))
    with serve_app(server.app()) as url:
        code, output = invoke([*toy_run_args(f"{url}/v1", data, tmp_path, "neg", steps=2,
                                             sets=("lm.models.default.max_retries=0",)), "--no-cache",
                               "--max-tokens", "500"])
    one_line_error(code, output, "usage.completion_tokens is -1000000000")
    assert len(server.requests) <= 8  # the first replies in flight (concurrency 8), not a whole run (~60)


def test_reply_with_a_lone_surrogate_or_deep_nesting_never_crashes(tmp_path):
    """A lone surrogate in a reply becomes U+FFFD before the cache stores it (the cache is on here:
    storing it used to fail the run); a reply nested 100k deep is a malformed reply."""
    code, output, _ = run_against(tmp_path, "s", lambda b: b.replace('"content": "', '"content": "\\ud800', 1), ())
    assert code == 0, output
    deep = "[" * 100_000 + "]" * 100_000
    code, output, events = run_against(tmp_path, "d", lambda b: b.replace('"choices"', f'"x": {deep}, "choices"'))
    one_line_error(code, output, "decoevo resume")
    assert events[-1]["event"] == "stopped"


def test_a_non_model_error_mid_run_is_logged_as_stopped(tmp_path, monkeypatch):
    """A failure that is not a model call's (here the skill writer hits a full disk) still leaves a
    `stopped` event naming it, and the command prints one line."""
    from decoevo.rundir import RunWriter

    def full(self, candidate, label):
        raise OSError(28, "No space left on device", str(self.path / "candidates"))

    monkeypatch.setattr(RunWriter, "save_candidate", full)
    monkeypatch.setattr(RunWriter, "save_skill", lambda self, skill, parent: (
        full(self, skill, "") if parent is not None else RunWriter.write_text(self, f"skills/{skill.kind}.md", "")))
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        code, output = invoke([*toy_run_args(f"{url}/v1", data, tmp_path, "disk", steps=2), "--no-cache"])
    one_line_error(code, output, "No space left on device")
    events = [json.loads(line) for line in (tmp_path / "disk" / "events.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == "stopped" and events[-1]["category"] == "error"
    assert "No space left" in events[-1]["error"]


def test_request_cache_under_a_file_and_report_onto_a_pipe(tmp_path, run_copy):
    data = write_toy_questions(tmp_path / "toy.jsonl")
    code, output = invoke(["run", "--data", data, *dead(tmp_path), "--set", f"lm.cache_path={data}/c.sqlite"])
    one_line_error(code, output, "request cache", f"{data} is a file, not a directory")
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    one_line_error(*invoke(["report", run_copy, "-o", pipe]), f"-o {pipe}", "not a regular file")
    assert pipe.is_fifo()  # the atomic write would have replaced it with a regular file


def test_non_utf8_command_line_bytes(tmp_path):
    """Arguments that are not UTF-8 (Python holds them as lone surrogates): one line, exit 2."""
    data = write_toy_questions(tmp_path / "toy.jsonl")
    env = {**os.environ, "DECOEVO_CACHE": str(tmp_path / "c.sqlite")}
    base = [sys.executable, "-m", "decoevo", "run", "--data", str(data), *dead(tmp_path)]
    for extra, fragment in (([b"--set", b"hyper.steps=\xff", b"--set", b"hyper.x\xff=1"], "--set hyper.steps"),
                            ([b"--name", b"r\xff", b"--config", b"/tmp/\xff.yaml"], "not found")):
        done = subprocess.run([os.fsencode(a) for a in base] + extra, env=env, capture_output=True, timeout=120)
        stderr = done.stderr.decode("utf-8", "replace")
        one_line_error(done.returncode, stderr, fragment)


def test_checked_completion():
    from decoevo.lm.types import Completion, checked_completion

    fixed = checked_completion(Completion(text="a\ud800b\ud83d\ude00", prompt_tokens=1, completion_tokens=2))
    assert fixed.text == "a\ufffdb\U0001f600"  # a lone surrogate replaced, a proper pair joined
    for bad in (-1, 10**10):
        with pytest.raises(ValueError, match="completion_tokens"):
            checked_completion(Completion(text="x", prompt_tokens=1, completion_tokens=bad))
