"""`decoevo export`: print what a run ships, its final solver skill; or, with --to, write it as a promptfoo
config or an Inspect AI task (the skill, the questions and the co-evolved generator's rubrics)."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import typer

from .common import err_console, guarded, note, warn, write_output


@guarded
def export(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    out_dir: Path = typer.Argument(None, help="With --to: the directory to write the tool's files into."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the skill here instead of stdout."),
    to: str = typer.Option(None, "--to", help="promptfoo or inspect: write a config / task that tool runs as is."),
    data: str = typer.Option(None, "--data", help="With --to: these questions instead of the run's test split."),
    fmt: str = typer.Option(None, "--format", help="--data's format: jsonl, a benchmark's, promptfoo or inspect."),
    question_var: str = typer.Option(None, "--question-var", help="--format promptfoo: the variable holding the "
                                     "question (default: found)."),
    base_url: str = typer.Option(None, "--base-url", help="With --to: the endpoint the tool calls, instead of the "
                                 "run's (needed for a run on the embedded model)."),
    model: str = typer.Option(None, "--model", help="With --base-url: the model name served there."),
    threshold: float = typer.Option(None, "--threshold", help="--to promptfoo: a test passes when its weighted "
                                    "rubric score reaches this (0-1; default 0.75)."),
    api_key_env: str = typer.Option("OPENAI_API_KEY", "--api-key-env", help="With --base-url: the environment "
                                    "variable the tool reads the key from (its name is written, never the key)."),
    force: bool = typer.Option(False, "--force", help="With --to: replace files in OUT_DIR that decoevo did not "
                               "write (or that were edited since)."),
    system_prompt: bool = typer.Option(False, "--system-prompt", help="Print the whole system message every scored "
                                       "answer was generated with (decoevo's instructions + the skill), not the "
                                       "skill alone."),
) -> None:
    """Print the final solver skill (what ships), or write it for promptfoo / Inspect AI with --to.

    Warns on stderr if the skill is the initial one or the run unfinished. With --to, each question gets the
    rubric the run's final generator writes (through the cache); the run directory is only read."""
    from ..errors import ConfigError
    from ..rundir import RunReader
    from .shipped import export_warnings

    if to is not None:
        _export_to(run_dir, to, out_dir, data, fmt, question_var, base_url, model, api_key_env, threshold, force)
        for warning in export_warnings(run_dir):
            warn(warning)
        return
    if out_dir is not None or data is not None or threshold is not None or force:
        raise ConfigError("OUT_DIR, --data, --threshold and --force go with --to promptfoo|inspect")
    text = RunReader(run_dir).shipped_skill_text()
    for warning in export_warnings(run_dir):
        warn(warning)
    if system_prompt:
        from ..domain import Skill
        from ..interop.bundle import solver_system

        text = solver_system(Skill(kind="solver", version=0, text=text.strip()))
    elif output or sys.stdout.isatty():  # said where it is pasted from; a pipe to a script gets the skill only
        note("this is the skill alone; every scored answer was generated with it inside decoevo's system message "
             "(--system-prompt prints that message whole: paste that to get what was scored)")
    if output:
        write_output(output, text.strip() + "\n")
        err_console.print(f"wrote {output}")
    else:
        sys.stdout.write(text.strip() + "\n")


def _export_to(run_dir: Path, to: str, out_dir: Path | None, data: str | None, fmt: str | None,
               question_var: str | None, base_url: str | None, model: str | None, api_key_env: str,
               threshold: float | None, force: bool) -> None:
    from ..errors import ConfigError
    from ..interop.bundle import Endpoint
    from ..interop.export import export_run, read_questions

    if out_dir is None:
        raise ConfigError(f"--to {to} needs OUT_DIR, the directory to write its files into")
    if (base_url is None) != (model is None):
        raise ConfigError("--base-url and --model go together (the endpoint and the model it serves)")
    override = Endpoint(base_url.rstrip("/"), model, api_key_env) if base_url and model else None
    source = read_questions(data, fmt, question_var) if data else None
    for line in source.account if source else []:  # what an eval tool's file gave, and what it did not
        err_console.print(line, highlight=False, markup=False)
    inputs = (Path(data),) if data and "://" not in data else ()
    written = export_run(run_dir, to, out_dir, questions=source.questions if source else None, override=override,
                         threshold=threshold, force=force, inputs=inputs, kept=source.kept if source else None)
    for path in written:
        # one line a path, as it is (never wrapped or read as markup): a path is copied from here
        err_console.print(f"wrote {path}", highlight=False, soft_wrap=True, markup=False)
    if to == "promptfoo":
        from ..interop.promptfoo_out import PROMPTFOO_VERSION

        how = f"cd {shlex.quote(str(out_dir))} && npx promptfoo@{PROMPTFOO_VERSION} eval"
    else:
        how = (f"cd {shlex.quote(str(out_dir))} && inspect eval task.py (needs decoevo's inspect extra here: "
               "pip install 'decoevo[inspect]')")
    err_console.print(f"run it with: {how}", highlight=False, soft_wrap=True, markup=False)
    err_console.print("its tests score the co-evolved generator's rubric, 0-1 per test (level / 4 per criterion, "
                      + ("pass at the threshold); " if to == "promptfoo" else "weighted); ")
                      + "`decoevo compare` grades against the gold rubric, 0-100: the two need not agree",
                      highlight=False, soft_wrap=True, markup=False)
