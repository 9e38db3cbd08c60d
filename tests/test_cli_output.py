"""What the command line prints fits where it is printed: no table cell cut to "…" at 80 columns, the
whole table at 200 columns and in a file; `--json` for scripts; a run's last lines say what shipped."""

from __future__ import annotations

import io
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from decoevo.cli.display import show_table
from decoevo.lm.ledger import UsageLedger
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

ROOT = Path(__file__).resolve().parents[1]
LEDGER_HEADERS = (
    "role",
    "model",
    "calls",
    "hits",
    "inherited",
    "in tok",
    "out tok",
    "sec",
    "retry",
    "repair",
    "cut",
    "think tok",
    "infra",
    "parse",
    "refusal",
    "empty",
    "$ paid",
    "$ eff",
)


def ledger() -> UsageLedger:
    led = UsageLedger()
    for role in ("solve", "judge", "generate_rubric", "rewrite_solver", "structural_audit", "contrastive_audit"):
        led.record_call(role, "hf-smollm2-360m-instruct-q8", 12345, 2345, 12.3, cost_usd=0.0012)
        led.record_hit(role, "hf-smollm2-360m-instruct-q8")
    led.record_retry("judge", "hf-smollm2-360m-instruct-q8")
    return led


def shown(console: Console, **kw: object) -> str:
    show_table(console, ledger().table(title="usage: r"), keys=2)
    return console.file.getvalue()  # type: ignore[attr-defined,no-any-return]


def test_usage_table_at_80_columns_cuts_no_cell_and_keeps_every_number() -> None:
    out = shown(Console(file=io.StringIO(), width=80))
    assert "…" not in out and max(len(line) for line in out.splitlines()) <= 80
    for value in ("74070", "14070", "hf-smollm2-360m-instruct-q8", "contrastive_audit", "retry 1", "$0.0072"):
        assert value in out, out
    assert "inherited" in out  # named as zero everywhere, not silently dropped


def test_usage_table_whole_at_200_columns_and_in_a_file(monkeypatch: pytest.MonkeyPatch) -> None:
    wide = shown(Console(file=io.StringIO(), width=200))
    monkeypatch.delenv("COLUMNS", raising=False)
    to_file = shown(Console(file=io.StringIO()))  # a file: rich would assume 80 columns
    for out in (wide, to_file):
        header = next(line for line in out.splitlines() if "role" in line)
        assert all(h in header for h in LEDGER_HEADERS), header
        assert "…" not in out


def cli(*args: str, columns: int | None, tmp: Path, timeout: int = 120) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env.update(
        {
            "PYTHONPATH": str(ROOT / "src"),
            "DECOEVO_CACHE": str(tmp / "cache.sqlite"),
            "DECOEVO_DATA_DIR": str(tmp / "data"),
        }
    )
    if columns is not None:
        env["COLUMNS"] = str(columns)
    proc = subprocess.run(
        [sys.executable, "-m", "decoevo", *args], capture_output=True, text=True, env=env, cwd=tmp, timeout=timeout
    )
    assert proc.returncode == 0, proc.stderr
    return proc


@pytest.mark.parametrize("command", [["data", "list"], ["methods"]])
def test_listings_fit_80_columns_whole_at_200_and_json(command: list[str], tmp_path: Path) -> None:
    narrow = cli(*command, columns=80, tmp=tmp_path).stdout
    assert "…" not in narrow and max(len(line) for line in narrow.splitlines()) <= 80, narrow
    wide = cli(*command, columns=200, tmp=tmp_path).stdout
    piped = cli(*command, columns=None, tmp=tmp_path).stdout  # to a file
    assert "…" not in wide and "…" not in piped
    assert "┃" in wide and "┃" in piped  # the table itself when there is room
    data = json.loads(cli(*command, "--json", columns=80, tmp=tmp_path).stdout)
    names = [r["spec"] for r in data["splits"]] if command[0] == "data" else [r["name"] for r in data]
    assert ("healthbench:hard" in names) if command[0] == "data" else ("decoevo" in names and "skillopt" in names)
    for name in names:
        assert name in narrow


def test_a_toy_run_ends_saying_what_shipped_and_json_for_scripts(tmp_path: Path) -> None:
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        text = cli(*toy_run_args(f"{url}/v1", data, tmp_path / "runs", "a", steps=1), columns=80, tmp=tmp_path)
        as_json = cli(
            *toy_run_args(f"{url}/v1", data, tmp_path / "runs", "b", steps=1), "--json", columns=80, tmp=tmp_path
        )
    commands = [line for line in text.stdout.splitlines() if line.startswith("  decoevo ")]
    assert "…" not in text.stdout and max(len(line) for line in text.stdout.splitlines()
                                          if line not in commands) <= 80, text.stdout
    run_a = shlex.quote(str(tmp_path / "runs" / "a"))  # each next command whole on one line, however long
    assert commands == [f"  decoevo export {run_a}", f"  decoevo report {run_a}"], text.stdout
    summary = json.loads((tmp_path / "runs" / "a" / "summary.json").read_text())
    last = "".join(text.stdout[text.stdout.rindex("shipped: ") :].split())  # wrapped at 80 columns: unwrap
    kind = "improved" if summary["final_solver"].startswith("improved") else "INITIAL"
    assert last.startswith(f"shipped:the{kind}solverskill"), last
    assert "".join(summary["final_solver"].partition(": ")[2].split()) in last
    assert str(tmp_path / "runs" / "a" / "final_solver_skill.md") in last
    (record,) = [json.loads(line) for line in as_json.stdout.splitlines()]  # stdout: the JSON only
    assert record["run_dir"] == str(tmp_path / "runs" / "b") and record["status"] == "finished"
    assert record["final_solver"] == json.loads((tmp_path / "runs" / "b" / "summary.json").read_text())["final_solver"]


@pytest.mark.parametrize("columns", [80, 100])
def test_data_list_never_breaks_a_word(columns: int, tmp_path: Path) -> None:
    """Rich folds a word longer than its squeezed column (`licenc` / `e`): such a table does not fit, and
    is shown as blocks wrapped at spaces instead."""
    shown = cli("data", "list", columns=columns, tmp=tmp_path).stdout
    tokens = set(re.split(r"[\s\u2500-\u257f]+", shown))
    rows = json.loads(cli("data", "list", "--json", columns=columns, tmp=tmp_path).stdout)["splits"]
    words = {w for r in rows for field in ("description", "licence", "source") for w in str(r[field]).split()}
    assert words and words <= tokens, sorted(words - tokens)
    assert max(len(line) for line in shown.splitlines()) <= columns, shown


def test_a_long_value_wraps_at_spaces_in_the_block_layout() -> None:
    from rich.table import Table

    from decoevo.cli.display import vertical

    table = Table()
    table.add_column("name")
    table.add_column("what")
    table.add_row("x", "a description of eleven words that is longer than the line is")
    lines = vertical(table, 30).splitlines()
    assert max(len(line) for line in lines) <= 30, lines
    assert " ".join(" ".join(lines[1:]).split()) == "what a description of eleven words that is longer than the line is"


def test_the_banner_and_estimate_wait_for_the_data(tmp_path: Path) -> None:
    """A data file that does not load is the only thing said: no run banner or call estimate before it."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "no id"}\n')
    proc = subprocess.run([sys.executable, "-m", "decoevo", "run", "--data", str(bad), "--format", "jsonl",
                           "--runs-root", str(tmp_path / "runs")], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "80", "DECOEVO_CACHE": str(tmp_path / "c.sqlite")},
                          timeout=120, check=False)
    assert proc.returncode == 2 and "field 'id'" in proc.stderr, proc.stderr
    assert "expected:" not in proc.stdout and "->" not in proc.stdout, proc.stdout


def _commands(group, path=()):
    import click

    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the root group loads a command's module when it is asked for
        cmd = group.get_command(ctx, name)
        if isinstance(cmd, click.Group):
            yield from _commands(cmd, (*path, name))
        else:
            yield (*path, name), cmd


def test_help_keeps_every_bracket_rich_would_read_as_markup() -> None:
    """`pip install 'decoevo[mlflow]'` must not print as `pip install 'decoevo'`: every option help with a
    `[word]` in it is shown whole in `--help` at 80 columns."""
    import typer.main
    from typer.testing import CliRunner

    from decoevo.cli import app

    root = typer.main.get_command(app)
    checked = 0
    for path, cmd in _commands(root):
        helps = [p.help for p in cmd.params if getattr(p, "help", None) and re.search(r"\[[a-z]", p.help)]
        if not helps:
            continue
        out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80).output
        flat = " ".join(re.split(r"[\s\u2500-\u257f]+", out))
        for text in helps:
            for bracket in re.findall(r"\S*\[[a-z][^\]]*\]\S*", text):
                checked += 1
                assert bracket.replace("\\[", "[") in flat, (path, bracket)
    assert checked >= 2  # run's and sweep's --track at least
