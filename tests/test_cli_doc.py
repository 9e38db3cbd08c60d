"""docs/cli.md shows the command line as it is: its help and listing sections, captured at 80 columns,
are what the code prints now (regenerate with `python scripts/cli_doc.py docs/cli.md`), and nothing in
them is cut to "…" or wider than 80 columns."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
import cli_doc  # noqa: E402

PAGE = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("args", cli_doc.CHECKED, ids=" ".join)
def test_the_page_shows_what_the_cli_prints_at_80_columns(args: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        now = cli_doc.section(args, cli_doc.capture(args, Path(tmp)))
    assert now in PAGE, f"docs/cli.md is stale for `decoevo {' '.join(args)}`; run scripts/cli_doc.py\n{now}"
    block = now.split("```text\n", 1)[1]
    assert "…" not in block and all(len(line) <= 80 for line in block.splitlines())
