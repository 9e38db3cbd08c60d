"""Post-run steps: what a cell does after training, each an ordinary `decoevo` command on the run directory.

A step is done when its output file exists, so a sweep that is run again does only the steps still
missing. The commands themselves (`decoevo eval`, `decoevo dynamics`, `decoevo align`) live elsewhere;
a step whose command this install lacks is refused when the sweep is planned, before any training.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..lm.errors import ConfigError


@dataclass(frozen=True)
class PostStep:
    name: str
    command: str  # the decoevo subcommand, called as `decoevo COMMAND RUN_DIR`
    output: str  # the file it writes, relative to the run directory (docs/evaluation-files.md)

    def argv(self, run_dir: Path) -> list[str]:
        return [self.command, str(run_dir)]

    def done(self, run_dir: Path) -> bool:
        return (run_dir / self.output).is_file()


STEPS: dict[str, PostStep] = {s.name: s for s in [
    PostStep("test", "eval", "eval/test.json"),
    PostStep("dynamics", "dynamics", "eval/dynamics.json"),
    PostStep("alignment", "align", "eval/alignment.json"),
]}


class StepFailed(Exception):
    """A post-run step exited non-zero or did not write its output."""


def cli_commands() -> set[str]:
    import typer.main

    from ..cli import app

    group = typer.main.get_command(app)
    return set(getattr(group, "commands", {}))


def check_available(names: list[str]) -> None:
    """Refuse steps whose command is missing, naming the fix, so no cell trains and then fails."""
    have = cli_commands()
    missing = [n for n in names if STEPS[n].command not in have]
    if missing:
        commands = ", ".join(f"`decoevo {STEPS[n].command}`" for n in missing)
        raise ConfigError(f"evaluate lists {', '.join(missing)}, which needs {commands}; this install does not "
                          f"have it. Remove it from evaluate (e.g. --evaluate none) to train without it.")


def pending_steps(run_dir: Path, names: list[str]) -> list[str]:
    return [n for n in names if not STEPS[n].done(run_dir)]


def run_step(name: str, run_dir: Path) -> None:
    """Run `decoevo COMMAND RUN_DIR` in this process (its output goes to this process's log)."""
    import typer.main

    from ..cli import app

    step = STEPS[name]
    group = typer.main.get_command(app)
    try:
        code = group.main(args=step.argv(run_dir), prog_name="decoevo", standalone_mode=False)
    except Exception as exc:  # a usage error of the step's command, raised instead of printed
        raise StepFailed(f"`decoevo {step.command}` failed: {exc}") from exc
    if code:
        raise StepFailed(f"`decoevo {step.command} {run_dir}` exited with code {code}")
    if not step.done(run_dir):
        raise StepFailed(f"`decoevo {step.command}` finished but wrote no {step.output}")
