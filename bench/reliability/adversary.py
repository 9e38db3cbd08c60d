"""An adversarial pass over the command line's surfaces: hostile flags, files, servers and directories,
each run as a user would (`python -m decoevo ...` in a fresh directory, a toy server on 127.0.0.1), and
judged on what a user sees: the exit code, the number of lines on stderr, a traceback, a secret anywhere
in the output or the files left behind, a user's file changed, and the time it took.

A case passes when its exit code is the expected one (2 for input a user can fix), stderr holds at most
two lines and no traceback, no secret appears in any output or file, and its own check (a file kept, no
run directory made, a hint given) holds. The table goes to docs/reliability.md.

    .venv/bin/python -m bench.reliability.adversary            # every case, the markdown table on stdout
    .venv/bin/python -m bench.reliability.adversary --only seeds,limit
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

KEY = "sk-adversary-0123456789abcdef"  # the API key every case runs with: it must never appear anywhere


@dataclass
class Case:
    name: str
    what: str
    args: Callable[[Path, str], list[str]]  # (work dir, toy server URL) -> argv after `decoevo`
    code: int = 2
    setup: Callable[[Path, str], None] | None = None
    check: Callable[[Path, str, str], str | None] | None = None  # (work dir, stdout, stderr) -> problem
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class Outcome:
    case: Case
    code: int
    lines: int
    traceback: bool
    leak: bool
    problem: str | None
    seconds: float
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return (self.code == self.case.code and self.lines <= 2 and not self.traceback and not self.leak
                and self.problem is None)


def decoevo(args: list[str], cwd: Path, env: dict[str, str], timeout: float = 120) -> tuple[int, str, str, float]:
    started = time.monotonic()
    try:
        done = subprocess.run([sys.executable, "-m", "decoevo", *args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout if isinstance(exc.stdout, str) else ""
        err = exc.stderr if isinstance(exc.stderr, str) else ""
        return -9, out, err + f"\n(killed after {timeout:.0f} s)", time.monotonic() - started
    return done.returncode, done.stdout, done.stderr, time.monotonic() - started


def leaked(root: Path, *texts: str) -> bool:
    if any(KEY in t for t in texts):
        return True
    for path in root.rglob("*"):
        if path.is_file() and not path.is_symlink():
            try:
                if KEY.encode() in path.read_bytes():
                    return True
            except OSError:
                continue
    return False


# ---- setups and checks ---------------------------------------------------------------------------------

def toy_data(work: Path, url: str) -> None:
    write_toy_questions(work / "q.jsonl", n=12)


def no_runs_dir(work: Path, out: str, err: str) -> str | None:
    return "a run directory was made" if (work / "runs").exists() and any((work / "runs").iterdir()) else None


def says(*words: str) -> Callable[[Path, str, str], str | None]:
    def check(work: Path, out: str, err: str) -> str | None:
        missing = [w for w in words if w not in out + err]
        return f"does not say {missing}" if missing else None
    return check


def esc_ids(work: Path, url: str) -> None:
    line = json.dumps({"id": "q\x1b[2J\x1b]0;owned\x07", "prompt": "x"})
    (work / "esc.jsonl").write_text(line + "\n" + line + "\n", encoding="utf-8")


def no_escape(work: Path, out: str, err: str) -> str | None:
    return "an ESC reached the terminal" if "\x1b" in out + err else None


def users_report(work: Path, url: str) -> None:
    (work / "OUT").mkdir()
    (work / "OUT" / "report.html").write_text("my own report", encoding="utf-8")


def report_kept(work: Path, out: str, err: str) -> str | None:
    return None if (work / "OUT" / "report.html").read_text() == "my own report" else "the user's report.html changed"


def finished_run_with_linked_eval(work: Path, url: str) -> None:
    toy_data(work, url)
    env = {**os.environ, "OPENAI_API_KEY": KEY, "DECOEVO_CACHE": str(work / "cache.sqlite")}
    args = toy_run_args(f"{url}/v1", work / "q.jsonl", work / "runs", "r", steps=1)
    args = [a if not a.startswith("splits=") else "splits={train: 4, probe: 2, solver_gate: 2, "
            "generator_gate: 2, test: 2}" for a in args]
    code, _out, err, _ = decoevo(args, work, env)
    if code != 0:
        raise RuntimeError(f"setup run failed: {err[-2000:]}")
    (work / "elsewhere").mkdir()
    (work / "elsewhere" / "test.json").write_text("theirs", encoding="utf-8")
    eval_dir = work / "runs" / "r" / "eval"
    if eval_dir.exists():
        for p in eval_dir.iterdir():
            p.unlink() if p.is_file() else None
        eval_dir.rmdir()
    eval_dir.symlink_to(work / "elsewhere")


def target_kept(work: Path, out: str, err: str) -> str | None:
    files = sorted(p.name for p in (work / "elsewhere").iterdir())
    same = (work / "elsewhere" / "test.json").read_text() == "theirs"
    return None if same and files == ["test.json"] else f"wrote through the link: {files}"


def malformed_line(work: Path, url: str) -> None:
    write_toy_questions(work / "q.jsonl", n=12)
    with (work / "q.jsonl").open("a", encoding="utf-8") as f:
        f.write('{"id": "bad", "prompt": \n')


def cases() -> list[Case]:
    toy = ["--data", "q.jsonl", "--task", "healthbench", "--runs-root", "runs"]

    def run(*extra: str) -> Callable[[Path, str], list[str]]:
        return lambda work, url: ["run", "--base-url", f"{url}/v1", "--model", "toy", *toy, *extra]

    def repro(*extra: str) -> Callable[[Path, str], list[str]]:
        return lambda work, url: ["reproduce", "OUT", "--base-url", f"{url}/v1", "--model", "toy", "--plan-only",
                                  *extra]

    return [
        Case("seeds", "`run --seeds abc`", run("--seeds", "abc"), setup=toy_data, check=no_runs_dir),
        Case("seeds-empty", "`run --seeds ''`", run("--seeds", ""), setup=toy_data, check=no_runs_dir),
        Case("set-yaml", "`run --set 'hyper: ['` (bad YAML)", run("--set", "hyper: ["), setup=toy_data),
        Case("set-typo", "`run --set hyper.stepz=3`", run("--set", "hyper.stepz=3"), setup=toy_data,
             check=says("did you mean")),
        Case("steps-huge", "`run --set hyper.steps=1000000000 --max-calls 30`",
             run("--set", "hyper.steps=1000000000", "--max-calls", "30"), setup=toy_data, check=no_runs_dir),
        Case("steps-1e26", "`run --set hyper.steps=1e26`", run("--set", "hyper.steps=100000000000000000000000000"),
             setup=toy_data, check=no_runs_dir),
        Case("rollouts-huge", "`run --set hyper.rollouts=1000000000`", run("--set", "hyper.rollouts=1000000000"),
             setup=toy_data, check=no_runs_dir),
        Case("limit-zero", "`run --limit 0`", run("--limit", "0"), setup=toy_data, check=no_runs_dir),
        Case("concurrency-zero", "`run --concurrency 0`", run("--concurrency", "0"), setup=toy_data),
        Case("base-url-text", "`run --base-url 'not a url'`",
             lambda w, u: ["run", "--base-url", "not a url", "--model", "m", *toy], setup=toy_data,
             check=no_runs_dir),
        Case("base-url-ftp", "`run --base-url ftp://h/v1`",
             lambda w, u: ["run", "--base-url", "ftp://127.0.0.1/v1", "--model", "m", *toy], setup=toy_data,
             check=no_runs_dir),
        Case("model-unserved", "`run --model gpt-4o` against a server serving only `toy`",
             lambda w, u: ["run", "--base-url", f"{u}/v1", "--model", "gpt-4o", *toy], setup=toy_data,
             check=no_runs_dir),
        Case("model-no-url", "`run --model gpt-4o` (no `--base-url`)",
             lambda w, u: ["run", "--model", "gpt-4o", *toy], setup=toy_data, check=says("--base-url")),
        Case("model-is-key", "`run --model <the API key>`",
             lambda w, u: ["run", "--base-url", f"{u}/v1", "--model", KEY, *toy], setup=toy_data,
             check=no_runs_dir),
        Case("provider-no-key", "`run --model openai/gpt-4o` with no OPENAI_API_KEY",
             lambda w, u: ["run", "--model", "openai/gpt-4o", *toy], setup=toy_data, env={"OPENAI_API_KEY": ""},
             check=no_runs_dir),
        Case("malformed-line", "a question file with a torn last line", run(), setup=malformed_line,
             check=says("q.jsonl", "line 13")),
        Case("esc-ids", "a duplicate question id holding ESC sequences",
             lambda w, u: ["run", "--base-url", f"{u}/v1", "--model", "toy", "--data", "esc.jsonl",
                           "--runs-root", "runs"], setup=esc_ids, check=no_escape),
        Case("repro-seeds", "`reproduce --seeds 1.5`", repro("--seeds", "1.5")),
        Case("repro-seeds-empty", "`reproduce --seeds ''`", repro("--seeds", "")),
        Case("repro-tables-empty", "`reproduce --tables ''`", repro("--tables", "")),
        Case("repro-benchmarks-empty", "`reproduce --benchmarks ''`", repro("--benchmarks", "")),
        Case("repro-data-unknown", "`reproduce --data nosuch=q.jsonl`", repro("--data", "nosuch=q.jsonl"),
             setup=toy_data),
        Case("repro-user-dir", "`reproduce OUT` where OUT holds the user's report.html",
             lambda w, u: ["reproduce", "OUT", "--base-url", f"{u}/v1", "--model", "toy", "--yes",
                           "--allow-self-grading"],
             setup=users_report, check=report_kept),
        Case("eval-linked", "`eval RUN` with RUN/eval a symlink to another folder",
             lambda w, u: ["eval", "runs/r"], setup=finished_run_with_linked_eval, check=target_kept),
        Case("config-key", "`config hyper.steps`", lambda w, u: ["config", "hyper.steps"], code=0,
             check=says("steps")),
        Case("config-typo", "`config hyper.stepz`", lambda w, u: ["config", "hyper.stepz"], check=says("steps")),
        Case("watch-missing", "`report --watch nosuch`", lambda w, u: ["report", "--watch", "nosuch"]),
        Case("export-missing", "`export nosuch`", lambda w, u: ["export", "nosuch"]),
        Case("version", "`--version`", lambda w, u: ["--version"], code=0, check=says("decoevo")),
    ]


def run_case(case: Case, url: str) -> Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        env = {**os.environ, "OPENAI_API_KEY": KEY, "DECOEVO_CACHE": str(work / "cache.sqlite"),
               "COLUMNS": "400",  # one message is one line (80-column wrapping is checked in tests/test_cli_output.py)
               **case.env}
        if case.setup is not None:
            case.setup(work, url)
        code, out, err, seconds = decoevo(case.args(work, url), work, env)
        lines = len([line for line in err.splitlines() if line.strip()])
        problem = case.check(work, out, err) if case.check is not None else None
        if problem is None and case.code == 2 and seconds > 20:
            problem = f"took {seconds:.0f} s to refuse"
        return Outcome(case, code, lines, "Traceback" in out + err, leaked(work, out, err), problem, seconds,
                       err[-1500:])


def table(outcomes: list[Outcome]) -> str:
    rows = ["| case | exit (expected) | stderr lines | traceback | secret leaked | s | verdict |",
            "|---|---|---|---|---|---|---|"]
    for o in outcomes:
        verdict = "ok" if o.ok else f"**FAIL** {o.problem or ''}".strip()
        rows.append(f"| {o.case.what} | {o.code} ({o.case.code}) | {o.lines} | {'yes' if o.traceback else 'no'} | "
                    f"{'yes' if o.leak else 'no'} | {o.seconds:.1f} | {verdict} |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--show", action="store_true", help="print each failing case's stderr")
    args = parser.parse_args()
    chosen = [c for c in cases() if not args.only or c.name in args.only.split(",")]
    with serve_app(toy_server().app()) as url:
        outcomes = [run_case(c, url) for c in chosen]
    print(table(outcomes))
    failed = [o for o in outcomes if not o.ok]
    if args.show:
        for o in failed:
            print(f"\n--- {o.case.name} (exit {o.code})\n{o.stderr}")
    print(f"\n{len(outcomes) - len(failed)} of {len(outcomes)} cases pass")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
