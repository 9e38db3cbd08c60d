"""Mutation bench: break the safety-critical code on purpose, one small change at a time, and count how
many of the changes the tests that cover it notice.

A mutant is one small edit of one module: a comparison flipped or moved across its boundary, `and`/`or`
swapped, a condition negated or forced, a boolean or numeric constant changed, a returned value replaced
by a constant, a statement call removed, one entry dropped from a literal list. For each module the map
below names the test files that guard it; each mutant runs them (`pytest -x -q`) against a copy of the
checkout in a temporary directory (`PYTHONPATH` points at the copy's `src/`), so the working tree is never
edited and an interrupted bench leaves no mutant anywhere but in its temporary directory. A mutant is
killed when a test fails (or the run exceeds its time limit), and survives when every test passes.

    python -m bench.reliability.mutation [--modules redact.py,policies.py] [--max-per-module N] [--jobs 2]
        [--resume] [--fork] [--survivors EARLIER.json]

Mutants per module are sampled deterministically (a generator seeded by the module's path) when a module
has more sites than `--max-per-module`. Writes bench/results/mutation.json: per module the mutants, the
killed and the survivors (line, column, mutation, original and mutated source), and the wall time.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import json
import os
import queue
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine

ROOT = Path(__file__).resolve().parents[2]

# The safety-critical modules and the tests that guard each: test files (or test ids, FILE::NAME), then
# optionally "-k EXPR" to keep a long file's tests to those about the module (fast tests first: `-x` stops
# at the first failure). Each module's baseline is kept short: a mutant's time limit is 4x it.
_GUARDS = "not blind_auditor_is_sent and not no_generator_decision and not poisoned"
MODULES: dict[str, list[str]] = {
    # policies and scoring (eqs. 2-10), pair selection, verification, the audits
    "policies.py": ["test_scoring_policies.py", "test_thresholds.py", "test_truth_world_gate.py",
                    "test_method_guards.py", "-k", "not blind_auditor_is_sent and not poisoned"],
    "scoring.py": ["test_scoring_policies.py", "test_thresholds.py", "test_method_guards.py", "-k",
                   "not blind_auditor_is_sent and not poisoned"],
    "thresholds.py": ["test_thresholds.py", "test_scoring_policies.py", "test_method_guards.py", "-k", _GUARDS],
    "engine/pairs.py": ["test_scoring_policies.py", "test_thresholds.py"],
    "engine/verify.py": ["test_method_guards.py", "test_decision_shortcuts.py", "-k",
                         "signed or what_a_score or no_generator_decision or structural_settles or short_and_full"
                         " or audit_objectives_carry"],
    "engine/audits.py": ["test_method_guards.py", "test_cost_levers.py", "test_engine_toy.py", "-k",
                         "blind_auditor_is_sent or no_generator_decision or audited_pair_puts or early_stop"
                         " or frozen_set or reuse_draws or gate_answers or decoevo_learns or every_method_runs"],
    "roles/contrastive_audit.py": ["test_blind_audit_shortcut.py", "test_method_guards.py", "test_validity.py", "-k",
                                   "auditor or stage1 or blind_audit_shortcut"],
    # a test id (FILE::NAME) keeps one case of a parametrized test: the fast ones, and one toy run
    "engine/top_up.py": ["test_top_up.py::test_steps_past_t_draw_fresh_rewrite_samples_and_idle_steps_do_not_count",
                         "test_top_up.py::test_a_matched_token_budget_lands_on_its_target_within_half_a_call",
                         "test_top_up.py::test_a_top_up_that_can_never_reach_its_budget_ends_at_the_hard_bound",
                         "test_top_up.py::test_a_topped_up_run_whose_steps_repeat_reaches_its_paired_tokens[0]"],
    # issue 46.2, modules B: a rewrite that is not a skill is never gated; the estimate and its "up to ~N
    # paid" bound; the progress re-estimate; the run loop's records; the reproduce plan; docs; report --watch
    "engine/validity.py": ["test_validity_bounds.py", "test_validity.py", "test_validity_copies.py"],
    "engine/estimate.py": ["test_estimate_bounds.py", "test_estimate.py", "test_estimate_live.py",
                           "test_estimate_prior.py", "test_estimate_batches.py"],
    "engine/reestimate.py": ["test_estimate_live.py", "test_estimate_prior.py"],
    "engine/run.py": ["test_run_budget.py", "test_engine_toy.py", "test_fidelity_engine.py",
                      "test_hardening_round5.py::test_a_checkpoint_copied_from_another_seed_is_refused",
                      "test_method_guards.py::test_a_control_matched_to_a_run_lands_on_its_tokens_and_an_explicit"
                      "_cap_does_not", "test_parity.py::test_a_matched_runs_expected_line_is_its_paired_runs_usage",
                      "test_top_up.py::test_steps_past_t_draw_fresh_rewrite_samples_and_idle_steps_do_not_count",
                      "test_outcome_words.py"],
    "reproduce/plan.py": ["test_reproduce_plan.py", "test_reproduce_round3.py", "test_reproduce.py", "test_sample.py",
                          "-k", "transfer or plan or sample or tables or self_graded or controls_are_topped_up"],
    "cli/docs.py": ["test_docs_command.py"],
    "report/serve.py": ["test_report_serve.py", "test_report_watch_progress.py", "test_report_watch.py", "-k",
                        "not chromium and not running_run"],
    # the spend cap and the run's budget
    "lm/budget.py": ["test_method_guards.py", "test_spend_cap.py", "test_cost_budget.py", "-k",
                     "landing or client_refuses or lands_on_its or token_cap or budget or cap"],
    "lm/spend.py": ["test_spend_cap.py", "test_cap_lifting.py", "test_reproduce_round3.py", "-k",
                    "test_spend_cap or spend_log or log_deleted or started_after or cap_line"],
    # redaction, transport and redirects
    "redact.py": ["test_secret_masking.py", "test_client_cpu_round7.py", "test_leaks.py", "test_secrets.py",
                  "test_secrets_errors.py", "test_hardening_round5.py", "test_json_fast_path.py",
                  "test_round10_gaps.py", "-k",
                  "not test_hardening_round5 or secret_header or documented_header"],
    # issue 47.1 round seven: a completion's fields masked at once; the request cache (one payer per request)
    "lm/backend_secrets.py": ["test_secret_masking.py", "test_client_cpu_round7.py", "test_secrets.py",
                              "test_secrets_errors.py", "test_leaks.py"],
    "lm/cache.py": ["test_cache_leases.py", "test_lm_client.py", "test_client_cpu_round7.py",
                    "test_request_key_text.py"],
    "lm/bounded_body.py": ["test_reply_body_limit.py", "test_transport_bounds.py", "test_http1.py"],
    # round nine (issue 47.1/47.2): the direct path's own HTTP/1.1 client, and the backend that posts through it
    "lm/http1.py": ["test_http1.py", "test_openai_backend.py", "test_secrets_errors.py", "-k",
                    "not cli_run_against"],
    "lm/openai_backend.py": ["test_openai_backend.py", "test_http1.py", "test_lm_timeouts.py", "test_secrets_errors.py",
                             "test_lm_endpoint.py", "test_json_fast_path.py", "test_round10_gaps.py", "-k",
                             "not cli_run_against"],
    "lm/timeouts.py": ["test_within_timer.py", "test_lm_timeouts.py"],
    "roles/common.py": ["test_injection.py", "test_validity.py", "test_engine_toy.py"],
    "benchmarks/download.py": ["test_download_protocol.py", "test_data_downloads.py", "test_adversary_round3.py",
                               "-k", "not test_adversary_round3 or user_and_password"],
    # start-up (round seven, issue 47.2): the lazy benchmark registry (its data against every folder's record, a
    # folder loaded when its benchmark is used) and the analysis package's names loaded on first use
    "benchmarks/registry.py": ["test_benchmarks_registry.py", "test_benchmarks.py", "test_compare_ranges.py"],
    "benchmarks/graders.py": ["test_benchmarks_registry.py", "test_grading.py", "test_writingbench_official.py",
                              "test_eqbench_official.py", "test_compare_ranges.py"],
    "analysis/__init__.py": ["test_startup.py", "test_analysis_stats.py", "-k",
                             "analysis_package or scipy or coverage or graded_in_both"],
    # run-directory writes, resume classification
    "fileio.py": ["test_fileio.py", "test_adversary_round3.py", "test_rundir.py", "-k",
                  "not test_adversary_round3 or write_that_fails"],
    "rundir/files.py": ["test_run_file_links.py", "test_client_cpu_round7.py", "test_client_cpu_round8.py",
                        "test_rundir.py", "test_report_reader.py", "test_hardening_round5.py", "test_json_fast_path.py",
                        "test_round10_gaps.py", "-k", "not test_hardening_round5 or linked_folder"],
    "rundir/writer.py": ["test_rundir.py", "test_client_cpu_round7.py", "test_client_cpu_round8.py",
                         "test_transcript_members.py"],
    # round eight (issue 47.1): the request journal and the transcripts append to files kept open
    "rundir/requests.py": ["test_client_cpu_round8.py", "test_billed_everywhere.py", "test_hardening_round4.py",
                           "test_boundary_values.py"],
    "rundir/transcripts.py": ["test_client_cpu_round8.py", "test_run_file_links.py", "test_rundir.py",
                              "test_transcript_members.py"],
    "rundir/lock.py": ["test_rundir.py"],
    "engine/resume_config.py": ["test_resume_changes.py", "test_hardening_round5.py", "-k",
                                "not test_hardening_round5 or every_leaf_of_a_default"],
    # report escaping
    # the tests on a small fresh sweep, not those on the module's 60 s three-seed sweep
    "report/render.py": ["test_report.py", "test_hardening_round5.py", "test_leaks.py", "-k",
                         "skill_diff or reports_without_any_evaluation or tiny_grader or damaged_files_are_named"
                         " or plots_j_per_step or never_answered or escapes_every_model_written"
                         " or older_runs_unmasked_key"],
    # exports into the user's tools: text as data, the folder written into
    "interop/promptfoo_text.py": ["test_export_text.py"],
    # the export's JSON layout (outdir.json_text) is read back from both tools' files by the non-English test
    "interop/outdir.py": ["test_export_outdir.py", "test_interop_export.py::"
                          "test_a_non_english_question_and_skill_are_written_as_text_in_the_inspect_and_promptfoo_exports"],
    # exports (round six, issue 46.2): the files written, the skills and rubrics in them, the endpoint by name
    # only; the runs of the real promptfoo and Inspect (20-50 s each) are left to the default suite
    "interop/promptfoo_out.py": ["test_interop_export.py", "test_export_user_suite.py", "test_export_outdir.py",
                                 "-k", "not promptfoo_runs"],
    "interop/inspect_out.py": ["test_interop_export.py", "test_inspect_scorer.py", "test_export_outdir.py",
                               "-k", "inspect"],
    "interop/inspect_task.py": ["test_inspect_scorer.py"],
    "interop/export.py": ["test_export_outdir.py", "test_interop_export.py", "test_export_user_suite.py",
                          "-k", "not promptfoo_runs"],
    "interop/bundle.py": ["test_interop_export.py", "test_export_user_suite.py", "test_export_outdir.py",
                          "test_export_text.py", "-k", "not promptfoo_runs and not renders and not inert"],
    "interop/rubrics.py": ["test_export_outdir.py", "test_interop_export.py", "-k", "rubric"],
    # imports: every file reads or is one line naming its line and field; what is kept is kept verbatim
    "interop/promptfoo_in.py": ["test_interop.py", "test_interop_import.py", "-k", "not any_ and not inspect"],
    "interop/inspect_in.py": ["test_interop.py", "test_interop_import.py", "-k", "inspect and not any_"],
    "interop/importfiles.py": ["test_interop_import.py", "test_interop.py", "-k", "not any_ and not _run"],
    "interop/yamllines.py": ["test_interop_import.py", "test_interop.py", "-k", "not any_ and not _run"],
    "interop/promptfoo_model.py": ["test_interop_import.py", "-k", "provider or model"],
    "interop/imported.py": ["test_interop.py", "test_interop_import.py", "-k", "not any_"],
    "interop/staging.py": ["test_interop.py", "test_interop_import.py", "-k", "run"],
    "interop/readers.py": ["test_interop.py", "test_interop_import.py", "-k", "not any_ and not _run"],
    # compare's means, the evaluation files it reads, the outcome words, the model client (repairs, cache, ledger)
    "evaluation/compare.py": ["test_takehome_units.py", "test_compare_damage.py"],
    # round ten (issue 47.2): the entry point answering `--help`/`--version` without Typer, the root help drawn
    # as Typer draws it, and the evaluation records moved out of rundir/records.py
    "cli/entry.py": ["test_root_help.py", "test_startup.py::test_version_and_help_load_no_command",
                     "test_startup.py::test_the_entry_point_answers_help_and_version_as_the_typer_app",
                     "test_startup.py::test_the_entry_point_leaves_completion_and_typers_plain_help_to_typer"],
    "cli/roothelp.py": ["test_root_help.py", "test_startup.py::test_help_lists_each_command_as_its_own_help_says",
                        "test_startup.py::test_the_entry_point_answers_help_and_version_as_the_typer_app"],
    "rundir/evalrecords.py": ["test_eval_records.py", "test_compare_damage.py", "test_takehome_units.py",
                              "test_compare_ranges.py", "test_startup.py", "-k", "not real_run and not embedded"],
    "rundir/outcomes.py": ["test_outcome_words.py"],
    "rundir/evalfiles.py": ["test_grader_names.py", "test_takehome_units.py", "test_compare_damage.py", "-k",
                            "not eval_"],
    "lm/client.py": ["test_lm_client.py", "test_client_cpu_round7.py", "test_lm_cost.py", "test_billed_requests.py",
                     "test_shared_slots.py", "-k",
                     "not kill_9 and not poll_period"],
}

_FLIP = {ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq,
         ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is}
_BOUNDARY = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
_ARITH = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult}


@dataclass(frozen=True)
class Mutant:
    module: str
    line: int
    col: int
    kind: str
    original: str
    mutated: str
    start: int  # character offsets of the replaced span in the module's source
    end: int


def _offsets(source: str) -> list[int]:
    starts, pos = [0], 0
    for line in source.splitlines(keepends=True):
        pos += len(line)
        starts.append(pos)
    return starts


def _span(source: str, lines: list[int], node: ast.AST) -> tuple[int, int]:
    """The node's character span (ast columns count UTF-8 bytes)."""
    def at(lineno: int, col: int) -> int:
        text = source[lines[lineno - 1]:lines[lineno]]
        return lines[lineno - 1] + len(text.encode("utf-8")[:col].decode("utf-8"))

    return at(node.lineno, node.col_offset), at(node.end_lineno or node.lineno, node.end_col_offset or 0)


def _skipped_nodes(tree: ast.Module) -> set[int]:
    """Nodes not worth mutating: docstrings, annotations, f-string parts, TYPE_CHECKING blocks, and the
    messages of raised errors and warnings (text, not behaviour)."""
    skip: set[int] = set()

    def mark(node: ast.AST | None) -> None:
        if node is not None:
            skip.update(id(n) for n in ast.walk(node))

    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "strict":  # zip(strict=...) on equal lengths: the same
            mark(node)
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) \
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            mark(body[0])
        if isinstance(node, ast.AnnAssign):
            mark(node.annotation)
        if isinstance(node, ast.arg):
            mark(node.annotation)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            mark(node.returns)
        if isinstance(node, ast.JoinedStr):
            mark(node)
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            mark(node)
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            mark(node)
    return skip


def _returns_bool(node: ast.expr) -> bool:
    return isinstance(node, (ast.Compare, ast.BoolOp)) or (isinstance(node, ast.UnaryOp)
                                                            and isinstance(node.op, ast.Not))


def mutants_of(module: str, source: str) -> list[Mutant]:
    """Every mutant of one module's source, in source order."""
    tree = ast.parse(source)
    lines = _offsets(source)
    skip = _skipped_nodes(tree)
    out: list[Mutant] = []

    def add(node: ast.AST, kind: str, replacement: str, wrap: bool = True) -> None:
        start, end = _span(source, lines, node)
        original = source[start:end]
        text = f"({replacement})" if wrap else replacement
        mutated = source[:start] + text + source[end:]
        try:
            if ast.dump(ast.parse(mutated)) == ast.dump(tree):
                return
        except SyntaxError:
            return
        out.append(Mutant(module, node.lineno, node.col_offset, kind, original, text, start, end))

    def unparse_with(node: ast.AST, **changes: Any) -> str:
        copy = ast.parse(ast.unparse(node), mode="eval").body if isinstance(node, ast.expr) else node
        for key, value in changes.items():
            setattr(copy, key, value)
        return ast.unparse(copy)

    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Compare):
            for i, op in enumerate(node.ops):
                for table, kind in ((_FLIP, "negate comparison"), (_BOUNDARY, "boundary")):
                    if type(op) in table:
                        ops = list(node.ops)
                        ops[i] = table[type(op)]()
                        add(node, kind, unparse_with(node, ops=ops))
        elif isinstance(node, ast.BoolOp):
            other = ast.Or() if isinstance(node.op, ast.And) else ast.And()
            add(node, "and/or", unparse_with(node, op=other))
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            add(node, "drop not", ast.unparse(node.operand))
        elif isinstance(node, ast.BinOp) and type(node.op) in _ARITH:
            add(node, "arithmetic", unparse_with(node, op=_ARITH[type(node.op)]()))
        elif isinstance(node, ast.Constant) and not isinstance(node.value, str):
            value = node.value
            if isinstance(value, bool):
                add(node, "constant", repr(not value), wrap=False)
            elif isinstance(value, int):
                add(node, "constant", repr(value + 1), wrap=False)
                if value:
                    add(node, "constant", "0", wrap=False)
            elif isinstance(value, float):
                add(node, "constant", repr(value * 2 if value else 1.0), wrap=False)
        elif isinstance(node, (ast.If, ast.While, ast.IfExp)):
            if not (isinstance(node.test, ast.UnaryOp) and isinstance(node.test.op, ast.Not)):  # "drop not" does it
                add(node.test, "negate condition", f"not ({ast.unparse(node.test)})")
            if isinstance(node, ast.If):
                add(node.test, "remove condition", "True" if node.orelse else "False", wrap=False)
        elif isinstance(node, ast.Return) and node.value is not None:
            if _returns_bool(node.value):
                add(node.value, "return constant", "True", wrap=False)
                add(node.value, "return constant", "False", wrap=False)
            elif not isinstance(node.value, ast.Constant):
                add(node.value, "return constant", "None", wrap=False)
        elif isinstance(node, ast.Expr) and isinstance(node.value, (ast.Call, ast.Await)):
            add(node, "remove call", "pass", wrap=False)
        elif isinstance(node, (ast.List, ast.Tuple, ast.Set)) and len(node.elts) >= 2 \
                and all(isinstance(e, ast.Constant) for e in node.elts):
            for i in range(len(node.elts)):
                rest = [ast.unparse(e) for j, e in enumerate(node.elts) if j != i]
                text = {ast.List: "[{}]", ast.Set: "{{{}}}", ast.Tuple: "({},)"}[type(node)].format(", ".join(rest))
                add(node, "drop entry", text, wrap=False)
        elif isinstance(node, ast.Raise) and node.exc is not None:
            add(node, "remove raise", "pass", wrap=False)
    out.sort(key=lambda m: (m.start, m.end, m.kind, m.mutated))
    return out


def sample(mutants: list[Mutant], module: str, limit: int | None) -> list[Mutant]:
    """At most `limit` mutants, drawn by a generator seeded with the module path (the same every run)."""
    if limit is None or len(mutants) <= limit:
        return mutants
    picked = random.Random(f"mutation:{module}").sample(range(len(mutants)), limit)
    return [mutants[i] for i in sorted(picked)]


def _copy_tree(dest: Path) -> Path:
    """A copy of what the tests read (sources, tests, benches, docs, tools, project file), without caches."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", "results", ".mypy_cache")
    for name in ("src", "tests", "bench", "docs", "scripts"):
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, dest / name, ignore=ignore)
    for name in ("pyproject.toml", "README.md"):
        if (ROOT / name).is_file():
            shutil.copy2(ROOT / name, dest / name)
    if (ROOT / "tools").is_dir():  # the pinned eval tools the interop tests run (promptfoo: linked, not copied)
        shutil.copytree(ROOT / "tools", dest / "tools", ignore=shutil.ignore_patterns("node_modules"))
        modules = ROOT / "tools" / "promptfoo" / "node_modules"
        if modules.is_dir():
            (dest / "tools" / "promptfoo" / "node_modules").symlink_to(modules)
    (dest / "bench" / "results").mkdir(exist_ok=True)
    return dest


def _env(copy: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(PYTHONPATH=str(copy / "src") + os.pathsep + str(copy), PYTHONDONTWRITEBYTECODE="1",
               PYTHONHASHSEED="0")
    return env


def _args(tests: list[str]) -> list[str]:
    return ["-x", "-q", "-p", "no:cacheprovider", "--no-header",
            *[f"tests/{t}" if t.endswith(".py") or ".py::" in t else t for t in tests]]


# The process groups of the pytest runs and fork servers under way: a SIGTERM kills them all before the
# temporary directory goes (the pool's threads would otherwise wait for, and then start, more runs).
_LIVE: set[int] = set()
_STOP = threading.Event()


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def _stop(*_: object) -> None:
    _STOP.set()
    for pgid in list(_LIVE):
        _kill_group(pgid)
    sys.exit(143)


def _pytest(copy: Path, tests: list[str], timeout: float) -> tuple[str, float]:
    """'passed', 'failed' or 'timeout', and the seconds taken."""
    start = time.monotonic()
    cmd = [sys.executable, "-m", "pytest", *_args(tests)]
    proc = subprocess.Popen(cmd, cwd=copy, env=_env(copy), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    _LIVE.add(proc.pid)
    try:
        rc = proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)  # with whatever the tests started
        proc.wait()
        return "timeout", time.monotonic() - start
    finally:
        _LIVE.discard(proc.pid)
    return ("passed" if rc == 0 else "failed"), time.monotonic() - start


class ForkServer:
    """`bench.reliability.pytest_server` in a copy: one pytest run a request, forked from a process that
    has the third-party imports done (the copy's own code is imported fresh by every run)."""

    def __init__(self, copy: Path, test_files: list[str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "bench.reliability.pytest_server",
                                      *[f"tests/{t}" for t in test_files]], cwd=copy, env=_env(copy),
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, start_new_session=True)
        _LIVE.add(self.proc.pid)
        self.replies: queue.Queue[dict[str, Any]] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        if "ready" not in self.replies.get(timeout=1800):
            raise SystemExit("the pytest fork server did not start")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.replies.put(json.loads(line))
        self.replies.put({"rc": -1, "gone": True})

    def pytest(self, tests: list[str], timeout: float) -> tuple[str, float]:
        assert self.proc.stdin is not None
        start = time.monotonic()
        self.proc.stdin.write(json.dumps(_args(tests)) + "\n")
        self.proc.stdin.flush()
        pid = self.replies.get(timeout=600).get("pid")
        if pid is None:
            raise SystemExit("the pytest fork server stopped")
        _LIVE.add(pid)  # the child leads its own process group
        try:
            rc = self.replies.get(timeout=timeout)["rc"]
        except queue.Empty:
            _kill_group(pid)
            self.replies.get()
            return "timeout", time.monotonic() - start
        finally:
            _LIVE.discard(pid)
        return ("passed" if rc == 0 else "failed"), time.monotonic() - start

    def close(self) -> None:
        _kill_group(self.proc.pid)
        self.proc.wait()
        _LIVE.discard(self.proc.pid)


class Worker:
    """One copy of the checkout; mutants are written into it one at a time and always restored."""

    def __init__(self, base: Path, index: int, fork: bool = False) -> None:
        self.copy = _copy_tree(base / f"w{index}")
        probe = subprocess.run([sys.executable, "-c", "import decoevo; print(decoevo.__file__)"],
                               cwd=self.copy, env=_env(self.copy), capture_output=True, text=True, check=True)
        if not probe.stdout.strip().startswith(str(self.copy / "src")):
            raise SystemExit(f"the copy's decoevo is not the one imported: {probe.stdout.strip()}")
        files = sorted({t.split("::")[0] for tests in MODULES.values() for t in tests if ".py" in t})
        self.server = ForkServer(self.copy, files) if fork else None

    def _pytest(self, tests: list[str], timeout: float) -> tuple[str, float]:
        if self.server is not None:
            return self.server.pytest(tests, timeout)
        return _pytest(self.copy, tests, timeout)

    def baseline(self, tests: list[str]) -> tuple[str, float]:
        return self._pytest(tests, timeout=1800)

    def run(self, m: Mutant, source: str, tests: list[str], timeout: float) -> tuple[str, float]:
        if _STOP.is_set():
            raise SystemExit(143)
        path = self.copy / "src" / "decoevo" / m.module
        try:
            path.write_text(source[:m.start] + m.mutated + source[m.end:], encoding="utf-8")
            return self._pytest(tests, timeout)
        finally:
            path.write_text(source, encoding="utf-8")

    def close(self) -> None:
        if self.server is not None:
            self.server.close()


def _write(out: Path, report: dict[str, Any], started: float) -> None:
    total = sum(r["mutants"] for r in report["modules"].values())
    killed = sum(r["killed"] for r in report["modules"].values())
    report.update(mutants=total, killed=killed, survived=total - killed,
                  kill_rate=round(killed / total, 4) if total else None,
                  seconds=round(time.monotonic() - started, 1))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--modules", default="", help="comma-separated module paths under src/decoevo "
                        "(default: all in the map), e.g. redact.py,engine/verify.py")
    parser.add_argument("--max-per-module", type=int, default=12,
                        help="sample at most N mutants a module (default 12; 0: all)")
    parser.add_argument("--jobs", type=int, default=2, help="checkout copies testing mutants at once")
    parser.add_argument("--out", type=Path, default=RESULTS / "mutation.json")
    parser.add_argument("--list", action="store_true", help="only count the mutants per module")
    parser.add_argument("--survivors", type=Path, default=None, help="test only the mutants this earlier "
                        "results file lists as survivors (after new tests: the last kill rate)")
    parser.add_argument("--fork", action="store_true", help="run pytest forked from a server that has the "
                        "third-party imports done (bench/reliability/pytest_server.py) instead of a fresh "
                        "interpreter a mutant: the same tests, less start-up")
    parser.add_argument("--resume", action="store_true", help="keep the modules --out already has (same "
                        "--max-per-module) and test only the others: an interrupted run loses one module at most")
    args = parser.parse_args(argv)
    # a kill stops every run under way and ends through the temporary directory's cleanup: no copy (nor
    # mutant, nor pytest still testing one) is left behind
    signal.signal(signal.SIGTERM, _stop)
    wanted = [m.strip() for m in args.modules.split(",") if m.strip()] or list(MODULES)
    unknown = [m for m in wanted if m not in MODULES]
    if unknown:
        parser.error(f"unknown module(s) {', '.join(unknown)}; choose from {', '.join(MODULES)}")
    sources = {m: (ROOT / "src" / "decoevo" / m).read_text(encoding="utf-8") for m in wanted}
    plan = {m: (mutants_of(m, sources[m]), []) for m in wanted}
    chosen = {m: sample(all_, m, args.max_per_module or None) for m, (all_, _) in plan.items()}
    if args.survivors is not None:  # only the mutants an earlier run listed as survivors
        earlier = json.loads(args.survivors.read_text(encoding="utf-8"))["modules"]
        keys = {m: {(s["line"], s["col"], s["kind"], s["mutated"]) for s in r["survived"]}
                for m, r in earlier.items() if m in plan}
        chosen = {m: [x for x in plan[m][0] if (x.line, x.col, x.kind, x.mutated) in keys.get(m, set())]
                  for m in wanted}
        lost = {m: len(keys.get(m, ())) - len(chosen[m]) for m in wanted if len(keys.get(m, ())) != len(chosen[m])}
        if lost:
            raise SystemExit(f"survivors not found in today's source (was it edited?): {lost}")
        wanted = [m for m in wanted if chosen[m]]
    if args.list:
        for m in wanted:
            print(f"{m}: {len(plan[m][0])} mutants, {len(chosen[m])} sampled")
        return 0
    started = time.monotonic()
    report: dict[str, Any] = {"machine": machine(), "max_per_module": args.max_per_module, "jobs": args.jobs,
                              "fork": args.fork, "modules": {}}
    if args.resume and args.out.is_file():
        done = json.loads(args.out.read_text(encoding="utf-8"))
        if done.get("max_per_module") != args.max_per_module:
            parser.error(f"{args.out} sampled {done.get('max_per_module')} a module, not {args.max_per_module}")
        report["modules"] = {m: r for m, r in done.get("modules", {}).items() if m in wanted}
        report["resumed_seconds"] = done.get("seconds", 0.0) + done.get("resumed_seconds", 0.0)
        wanted = [m for m in wanted if m not in report["modules"]]
    with tempfile.TemporaryDirectory(prefix="decoevo-mutation-") as tmp, contextlib.ExitStack() as stack:
        workers = []
        for i in range(max(1, args.jobs)):
            workers.append(Worker(Path(tmp), i, fork=args.fork))
            stack.callback(workers[-1].close)
        for module in wanted:
            tests = MODULES[module]
            status, took = workers[0].baseline(tests)
            if status != "passed":
                raise SystemExit(f"{module}: its tests fail without a mutant ({status}); fix that first")
            timeout = max(60.0, 4 * took)
            mutants = chosen[module]
            t0 = time.monotonic()

            def one(k: int, m: Mutant, _tests: list[str] = tests, _timeout: float = timeout,
                    _module: str = module) -> tuple[Mutant, str]:
                return m, workers[k % len(workers)].run(m, sources[_module], _tests, _timeout)[0]

            # a worker runs one mutant at a time: mutant k goes to worker k % jobs, and each worker goes through
            # its share on its own (no rounds: a quick kill does not wait for a survivor's full test run)
            def share(w: int, _mutants: list[Mutant] = mutants) -> list[tuple[Mutant, str]]:
                return [one(k, m) for k, m in enumerate(_mutants) if k % len(workers) == w]

            with ThreadPoolExecutor(len(workers)) as pool:
                shares = list(pool.map(share, range(len(workers))))
            results = sorted((r for part in shares for r in part), key=lambda r: (r[0].start, r[0].end, r[0].kind))
            survivors = [asdict(m) | {"status": s} for m, s in results if s == "passed"]
            for s in survivors:
                del s["start"], s["end"]
            killed = sum(1 for _, s in results if s != "passed")
            report["modules"][module] = {
                "tests": tests, "sites": len(plan[module][0]), "mutants": len(mutants), "killed": killed,
                "timeouts": sum(1 for _, s in results if s == "timeout"), "survived": survivors,
                "baseline_s": round(took, 1), "seconds": round(time.monotonic() - t0, 1),
                "load_1min": round(os.getloadavg()[0], 1)}  # the machine's load as the module ended
            print(f"{module}: {killed}/{len(mutants)} killed ({len(plan[module][0])} sites), "
                  f"{time.monotonic() - t0:.0f}s", flush=True)
            _write(args.out, report, started)  # after every module: an interrupted run keeps what it measured
            for s in survivors:
                print(f"  survived {module}:{s['line']}:{s['col']} {s['kind']}: {s['original']!r} -> "
                      f"{s['mutated']!r}", flush=True)
    _write(args.out, report, started)
    print(f"{report['killed']}/{report['mutants']} killed ({report['kill_rate']}), {report['seconds']:.0f}s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
