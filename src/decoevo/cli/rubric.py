"""`decoevo rubric`: what a run's co-evolved rubric generator writes for new questions (a test asset)."""

from __future__ import annotations

from pathlib import Path

import typer

from ..lm.errors import ConfigError
from .common import check_output, err_console, guarded, warn


@guarded
def rubric(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    data: str = typer.Option(..., "--data", help="The questions: JSONL, a benchmark's file, a promptfoo config "
                             "or an Inspect dataset."),
    fmt: str = typer.Option(None, "--format", help="jsonl (default), a benchmark's format, promptfoo or inspect."),
    question_var: str = typer.Option(None, "--question-var", help="--format promptfoo: the variable holding the "
                                     "question (default: found)."),
    output: Path = typer.Option(Path("rubrics.jsonl"), "--output", "-o", help="The JSONL file to write."),
    force: bool = typer.Option(False, "--force", help="Replace -o even if it is not a rubrics file decoevo wrote."),
) -> None:
    """Write the co-evolved generator's rubric for each question (JSONL: id, question, rubric).

    Rubrics the run already generated come from the cache; new ones are paid once."""
    from ..analysis.discrimination import discrimination_warnings
    from ..interop.export import check_rubrics_output, read_questions, write_rubrics

    if not data.strip():  # Path("") is ".": the message would be ".: file not found"
        raise ConfigError("--data is empty; give the questions file (JSONL, a benchmark's file, a promptfoo "
                          "config or an Inspect dataset)")
    check_output(output, replaced=True)
    check_rubrics_output(output, inputs=(Path(data),) if "://" not in data else (), run_dir=run_dir, force=force)
    source = read_questions(data, fmt, question_var)
    for line in source.account:  # what an eval tool's file gave, and what it did not
        err_console.print(line, highlight=False, markup=False)
    questions = source.questions
    n = write_rubrics(run_dir, questions, output)
    err_console.print(f"wrote {n} rubric(s) to {output}", highlight=False)
    for warning in discrimination_warnings(run_dir):  # rubrics a judge scores alike cannot guard anything
        warn(warning)
