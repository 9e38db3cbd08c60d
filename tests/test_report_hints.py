"""Every command the report and a run's last lines suggest works on the run it is shown for: a toy-world
`quick` run over the toy OpenAI-compatible server, then each suggested `decoevo ...` command run as shown."""

from __future__ import annotations

import html
import re
import shlex
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.report import build_report, render
from decoevo.report.hints import next_steps

# a command in backticks (terminal lines, hovers), in a <code> element, or in a hover after "run "
# and an indented line of its own, as a run's last lines show the next commands (a comment after it)
_PATTERNS = (
    r"`(decoevo [^`]+)`",
    r"<code>(decoevo [^<]+)</code>",
    r'title="not computed: run (decoevo [^"]+)"',
    r"(?m)^ +(decoevo [^#\n]*[^#\s])",
)


def suggested(text: str, run: Path) -> list[str]:
    """Every `decoevo ...` command in `text`; a RUN placeholder stands for the run it is shown for."""
    found = [html.unescape(m) for p in _PATTERNS for m in re.findall(p, text)]
    return list(dict.fromkeys(c.replace("RUN", str(run)) for c in found))


def invoke(runner: CliRunner, command: str) -> str:
    words = shlex.split(command)
    assert words[0] == "decoevo", command
    result = runner.invoke(app, words[1:], env={"COLUMNS": "250"})  # a terminal as wide as the run's path
    assert result.exit_code == 0, f"`{command}` failed:\n{result.output}"
    return result.output


def test_every_command_suggested_for_a_quick_run_works(tmp_path, monkeypatch):
    pytest.importorskip("uvicorn")
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_server, write_toy_questions

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.chdir(tmp_path)  # `decoevo report RUN` writes report.html here
    runner = CliRunner()
    data = write_toy_questions(tmp_path / "toy.jsonl", 24)
    run = tmp_path / "runs" / "first"
    with serve_app(toy_server().app()) as url:
        args = ["--base-url", f"{url}/v1", "--model", "toy", "--data", str(data), "--task", "healthbench"]
        args += ["--preset", "quick", "--runs-root", str(tmp_path / "runs"), "--name", "first"]
        output = invoke(runner, shlex.join(["decoevo", "run", *args]))
        last = suggested(output, run)
        assert {c.split()[1] for c in last} >= {"export", "report", "compare"}, output
        for command in last:
            invoke(runner, command)
        page = (tmp_path / "report.html").read_text(encoding="utf-8")
        in_report = [c for c in suggested(page, run) if c not in last]
        # `quick` holds out no diagnostic split: dynamics is suggested on the test split instead
        assert any(c.split()[1] == "dynamics" for c in in_report), in_report
        assert any(c.split()[1] == "align" for c in in_report), in_report
        for command in in_report:
            invoke(runner, command)
        # a run killed after its last checkpoint, before it wrote summary.json: the report says to resume it
        killed = tmp_path / "runs" / "killed"
        shutil.copytree(run, killed)
        (killed / "summary.json").unlink()
        resume = [c for c in suggested(render(build_report([killed])), killed) if c.split()[1] == "resume"]
        assert resume == [f"decoevo resume {killed}"]
        invoke(runner, resume[0])
        assert (killed / "summary.json").is_file()
    # the commands computed what the report lacked: nothing is left to suggest
    page = render(build_report([run]))
    assert 'class="callout note notcomputed"' not in page and suggested(page, run) == []


def test_no_command_is_suggested_where_none_would_work(tmp_path, monkeypatch):
    """A run holding out no test or diagnostic split gets reasons instead of commands that would fail, and a
    run whose test questions have no gold rubric is not sent to `align`."""
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    runner = CliRunner()
    data = write_toy_questions(tmp_path / "toy.jsonl", 24)
    plain = tmp_path / "plain.jsonl"  # the same questions without gold rubrics
    plain.write_text(re.sub(r', "gold": \{.*?\]\}', "", data.read_text()), encoding="utf-8")
    with serve_app(toy_server().app()) as url:
        runs = tmp_path / "runs"
        invoke(runner, shlex.join(["decoevo", *toy_run_args(f"{url}/v1", data, runs, "none", steps=1)]))
        invoke(
            runner,
            shlex.join(
                ["decoevo", *toy_run_args(f"{url}/v1", plain, runs, "nogold", steps=1, sets=("splits.test=2",))]
            ),
        )
    none, nogold = (build_report([tmp_path / "runs" / name]).runs[0] for name in ("none", "nogold"))
    for kind in ("eval", "dynamics", "align"):
        (step,) = next_steps(kind, [none])
        assert step.command is None and "split" in step.note
    (step,) = next_steps("align", [nogold])
    assert step.command is None and "gold rubric" in step.note
    (step,) = next_steps("eval", [nogold])
    assert step.command == f"decoevo eval {tmp_path / 'runs' / 'nogold'}"
    page = render(build_report([tmp_path / "runs" / "none"]))
    said = [c.split()[1:] for c in suggested(page, tmp_path / "runs" / "none")]
    assert sorted(said) == [["compare", "--help"], ["eval", "--help"]], said
    invoke(runner, "decoevo eval --help")
    invoke(runner, "decoevo compare --help")
