"""Issue 44.4: what a user pastes is what was scored. `export --system-prompt` prints the whole system message
every scored answer was generated with; the bare skill written to a file says that it is only the skill."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.domain import QuestionView, Skill
from decoevo.roles.solve import messages


def finished_run(tmp_path):
    run = tmp_path / "r"
    run.mkdir()
    (run / "checkpoint.json").write_text(json.dumps({"state": {"solver": {"kind": "solver", "version": 2,
                                                                         "text": "Be precise."}},
                                                     "ledger": {}, "events_offset": 0}))
    (run / "summary.json").write_text(json.dumps({
        "method": "decoevo", "seed": 0, "steps_done": 3, "status": "finished", "solver_version": 2,
        "final_solver": "improved: solver v002 passed the solver gate (1 accepted rewrite(s))"}))
    return run


def test_the_system_prompt_printed_is_the_one_every_answer_was_scored_with(tmp_path) -> None:
    run = finished_run(tmp_path)
    result = CliRunner().invoke(app, ["export", str(run), "--system-prompt"])
    assert result.exit_code == 0, result.output
    scored = messages(QuestionView.from_text("q", "hi"), Skill(kind="solver", version=2, text="Be precise."))[0]
    assert result.stdout == scored.content + "\n"


def test_the_skill_alone_in_a_file_says_what_it_leaves_out(tmp_path) -> None:
    run = finished_run(tmp_path)
    result = CliRunner().invoke(app, ["export", str(run), "-o", str(tmp_path / "prompt.md")])
    assert result.exit_code == 0 and (tmp_path / "prompt.md").read_text() == "Be precise.\n"
    assert "--system-prompt" in " ".join(result.stderr.split())
    piped = CliRunner().invoke(app, ["export", str(run)])
    assert piped.stdout == "Be precise.\n" and piped.stderr == ""  # a script reading stdout gets the skill only
