"""Adversarial pass, round three (issue 21, "Done means"): cases no earlier pass covered, each a bug
found and fixed (docs/reliability.md, "Adversarial pass, round three")."""

from __future__ import annotations

from pathlib import Path

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
    assert "credentials" in out or "query string" in out
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
