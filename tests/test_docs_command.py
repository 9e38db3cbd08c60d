"""Docs a wheel user has: `decoevo docs` lists and prints the user docs the package ships (the wheel test in
test_package.py runs it from an installed wheel), the configuration reference and the report cite them as
`decoevo docs TOPIC`, and at 80 columns no --help cuts an example and no error splits a URL."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.cli.docs import docs_folder, find, topics
from decoevo.engine.config_reference import render_reference

ROOT = Path(__file__).resolve().parents[1]


def test_docs_lists_every_page_and_prints_one_whole() -> None:
    listed = CliRunner().invoke(app, ["docs"], terminal_width=80)
    assert listed.exit_code == 0
    for page in (ROOT / "docs").glob("*.md"):
        assert page.stem in listed.output, page
    printed = CliRunner().invoke(app, ["docs", "cost"])
    assert printed.exit_code == 0 and printed.output == (ROOT / "docs" / "cost.md").read_text(encoding="utf-8")
    assert CliRunner().invoke(app, ["docs", "config"]).output.startswith("#")  # an unambiguous prefix


def test_the_list_names_each_page_by_its_title_and_says_how_to_read_one() -> None:
    """Each row is a topic and the page's first heading (not its first line of prose), and the list ends by
    saying how to print one (issue 46.2: both survived the mutation bench)."""
    lines = CliRunner().invoke(app, ["docs"], terminal_width=120).output.splitlines()
    for page in sorted((ROOT / "docs").glob("*.md")):
        heading = next(x for x in page.read_text(encoding="utf-8").splitlines() if x.startswith("#"))
        row = next(x for x in lines if x.split()[0] == page.stem)
        assert row.split(None, 1)[1] == heading.lstrip("#").strip(), (page, row)
    assert lines[-1].startswith("read one: decoevo docs TOPIC")


@pytest.mark.parametrize("topic", ["nope", "", "c", "../README"])
def test_an_unknown_topic_is_one_line_and_exit_2(topic: str) -> None:
    out = CliRunner().invoke(app, ["docs", topic])
    assert out.exit_code == 2 and "Traceback" not in out.output
    assert "no docs page" in out.output and "configuration" in out.output


def test_pages_are_found_by_name_file_or_prefix() -> None:
    folder = docs_folder()
    assert folder is not None
    pages = topics(folder)
    assert find(pages, "cost.md") == find(pages, "docs/cost.md") == pages["cost"]
    assert find(pages, "c") is None  # ambiguous: cli, configuration, cost


def test_references_cite_docs_a_wheel_user_has() -> None:
    """What `decoevo config` and the report print names `decoevo docs TOPIC`, never a docs/ path."""
    reference = render_reference()
    assert "decoevo docs mechanism" in reference and "docs/" not in reference.replace("decoevo docs", "")
    for template in (ROOT / "src" / "decoevo" / "report" / "templates").glob("*.j2"):
        text = template.read_text(encoding="utf-8")
        assert not re.search(r"docs/[\w-]+\.md", text), template
    for topic in re.findall(r"decoevo docs ([\w-]+)", reference):
        assert (ROOT / "docs" / f"{topic}.md").is_file(), topic


def _commands(group: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    for name, sub in getattr(group, "commands", {}).items():
        found += _commands(sub, (*path, name))
    return found


def test_no_help_cuts_anything_at_80_columns() -> None:
    for path in _commands(typer.main.get_command(app)):
        out = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, terminal_width=80).output
        assert "…" not in out, (path, out)


def test_an_offline_fetch_keeps_its_url_on_one_line(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["data", "fetch", "healthbench"], terminal_width=80, env={
        "COLUMNS": "80", "DECOEVO_DATA_DIR": str(tmp_path), "DECOEVO_DATA_MIRROR": "http://127.0.0.1:9/"})
    assert out.exit_code != 0
    urls = re.findall(r"https?://\S+", out.output)
    whole = [u.rstrip(":").endswith((".jsonl", "/")) or "." in u.rsplit("/", 1)[-1] for u in urls]
    assert urls and all(whole), out.output
    assert all(len(line) <= 80 or re.match(r"^https?://\S+$", line) for line in out.output.splitlines()), out.output
