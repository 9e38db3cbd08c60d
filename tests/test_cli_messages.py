"""Error and warning lines at 80 columns (issue 27): a backticked command in a message is never split
across lines, so copying the line gives a command that runs."""

from __future__ import annotations

import io
import re

from rich.console import Console
from typer.testing import CliRunner

from decoevo.cli import app, common
from decoevo.cli.common import wrap_message

QUOTED = re.compile(r"`[^`]*`")


def one_atom(line: str) -> bool:
    """A line with no space outside backticks: what may be wider than the terminal."""
    return " " not in QUOTED.sub("", line)


def test_wrapping_breaks_only_at_spaces_outside_backticks():
    command = "`decoevo resume /tmp/some/rather/long/runs/folder/decoevo-healthbench-s0`"
    text = f"runs/x already holds a run; continue it with {command}, or pass --name and more words after it"
    lines = wrap_message(text, 80)
    assert len(lines) > 1 and " ".join(lines) == text  # only spaces became line breaks
    assert any(command in line for line in lines)
    assert all(len(line) <= 80 or one_atom(line) for line in lines), lines
    too_wide = "`decoevo sweep " + "x" * 90 + "`"
    assert too_wide in wrap_message(f"interrupted; run {too_wide} again", 80)  # its own line, whole
    odd = "a ` b " + "word " * 30  # one backtick quotes nothing: ordinary wrapping
    assert all(len(line) <= 80 for line in wrap_message(odd, 80))
    assert wrap_message("one\ntwo", 80) == ["one", "two"]


def test_a_failing_command_prints_its_backticked_command_whole_at_80_columns(tmp_path, monkeypatch):
    buffer = io.StringIO()
    monkeypatch.setattr(common, "err_console", Console(file=buffer, width=80, color_system=None))
    root = tmp_path / ("runs-" + "r" * 30)
    (root / "r1").mkdir(parents=True)
    (root / "r1" / "config.yaml").write_text("method: decoevo\n")
    result = CliRunner().invoke(app, ["run", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--any-model",
                                      "--runs-root", str(root), "--name", "r1"])
    assert result.exit_code == 2, result.output
    printed = buffer.getvalue()
    assert "already holds a run" in printed and len(printed.splitlines()) > 1, printed
    assert any(f"`decoevo resume {root / 'r1'}`" in line for line in printed.splitlines()), printed
    assert all(len(line) <= 80 or one_atom(line) for line in printed.splitlines()), printed


def test_no_help_points_at_a_page_the_wheel_does_not_ship():
    """`--help` is what a wheel user has: it names `decoevo config KEY`, never only docs/X.md."""
    import typer.main

    group = typer.main.get_command(app)
    ctx = typer.Context(group)
    data = group.get_command(ctx, "data")  # the root group loads a command's module when it is asked for
    names = [[n] for n in group.list_commands(ctx) if n != "data"] + [["data", n] for n in data.commands]
    assert len(names) > 15
    for name in names:
        result = CliRunner().invoke(app, [*name, "--help"])
        assert result.exit_code == 0, (name, result.output)
        assert "docs/" not in result.output, (name, result.output)


def test_doctor_names_an_unknown_lm_key_as_written():
    result = CliRunner().invoke(app, ["doctor", "--set", "lm.models.default.timeout_z=3"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert "lm.models.default.timeout_z: unknown key" in said and "did you mean lm.models.default.timeout_s" in said


def test_eval_limit_without_transfer_data_is_refused_not_ignored(tmp_path):
    """`eval RUN --limit 3` used to grade the whole test split and say nothing."""
    result = CliRunner().invoke(app, ["eval", str(tmp_path), "--limit", "3"])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert "--limit 3 applies to transfer data (--data or --benchmark)" in said and "splits.test" in said
