"""The commands of `decoevo`, one line each (the order of `decoevo --help`), and the root's own help texts: data
without Typer, read by the Typer app (cli/main.py) and by `decoevo --help` drawn without it (cli/entry.py)."""

from __future__ import annotations

from typing import NamedTuple

ROOT_HELP = ("decoevo: evolve an LLM feature's system prompt against rubric judges, and the rubric generator "
             "safely.")
VERSION_HELP = "Print the version and exit."


class Command(NamedTuple):
    module: str  # relative to this package
    attr: str  # the command function, or a Typer app for a group of commands
    summary: str  # the first paragraph of its help, as `decoevo --help` lists it (tests/test_startup.py checks it)


# One line per command (the order of `decoevo --help`, which lists a group of commands, `data`, last).
COMMANDS: dict[str, Command] = {
    "doctor": Command(".doctor", "doctor",
                      "Show the available backends, load the default model and make one structured call."),
    "config": Command(".config", "config_cmd", "Show every configuration key: its default, allowed values and "
                      "meaning (what --set and --config take)."),
    "methods": Command(".methods", "list_methods", "List the methods (a method is a configuration of the one engine)."),
    "run": Command(".run", "run", "Run a method (default: DecoEvo) and write a run directory per seed."),
    "pilot": Command(".pilot", "pilot_cmd", "Choose ε, τ_tie and K on the pilot split; a run takes them with --pilot.\n"
                     "Keys hyper.epsilon, hyper.tau_tie, hyper.audit_every (`decoevo config hyper`); calls logged "
                     "apart."),
    "resume": Command(".run", "resume", "Continue a stopped or killed run from its last completed step; paid calls "
                      "come from the cache.\nA changed method or seed is refused; a changed data file or splits too, "
                      "unless --accept-changed-data;\nan edited config.yaml that changes results too, unless "
                      "--accept-changed-config."),
    "sweep": Command(".sweep", "sweep",
                     "Run a grid of methods × seeds × benchmarks (matched splits); finished cells are not rerun."),
    "export": Command(".export", "export", "Print the final solver skill (what ships), or write it for promptfoo / "
                      "Inspect AI with --to."),
    "rubric": Command(".rubric", "rubric",
                      "Write the co-evolved generator's rubric for each question (JSONL: id, question, rubric)."),
    "eval": Command(".eval", "eval_", "Grade a run's solver skill with the benchmark's official rule; writes "
                    "RUN/eval/<name>-v<N>-<grader>.json."),
    "compare": Command(".compare", "compare", "Your initial solver skill vs the shipped one, per question: both "
                       "scores, Δ with a paired 95% CI."),
    "dynamics": Command(".eval", "dynamics", "Score every checkpoint on the diagnostic split: generated-rubric proxy "
                        "and gold grade (Figure 3)."),
    "align": Command(".eval", "align",
                     "Criterion-level P/R/F1 of the final generated rubrics against the gold rubrics (Table 5)."),
    "report": Command(".report", "report", "Write one self-contained HTML report: results, comparisons, dynamics, "
                      "alignment, cost and every run."),
    "reproduce": Command(".reproduce", "reproduce_command", "The paper's whole experiment: Tables 1-5 and Figure 3, "
                         "graded independently, with the report."),
    "docs": Command(".docs", "docs",
                    "List the user documentation shipped with decoevo, or print one page (Markdown) to stdout."),
    "data": Command(".data", "data_app", "Download and check the public benchmark files."),
}
