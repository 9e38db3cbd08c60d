"""What a run's start-up imports are for, and the part of them decoevo does not own (issue 47.2).

Two measurements behind the start-up table (`bench/client/startup.py` has the times):

1. **Use.** A whole served `decoevo run` (the toy world, as in startup.py) under a profiler hook that notes every
   decoevo source file one of whose functions is called. Each decoevo module loaded by the run's first paid call
   is then *used* (one of its own functions ran before the run ended) or *import only* (nothing in it ran: a
   package's `__init__`, a table of constants, or a module that could be loaded later or not at all). Only the
   last kind can leave the start-up without moving its cost to later in the same run.
2. **Floor.** In fresh processes, CPU of importing the first call's import set (as startup.py does), and of the
   same set without decoevo's own modules: the standard library and the dependencies a run loads (asyncio,
   pydantic, typer, rich, yaml, sqlite3, ssl...). decoevo's share is the difference; it includes the pydantic
   models and dataclasses decoevo defines and pydantic's first build of a validator.

    .venv/bin/python -m bench.client.import_use [--repeats 9] [--out bench/results/import_use.json]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine, write_result
from bench.client.startup import ROOT, first_call, summary, timed, toy_server, tree_env

# Run inside the measured process: note the source file of every decoevo function called, in every thread, until
# the run ends; then write those files and the file of every decoevo module loaded.
TRACER = """
import atexit, json, os, runpy, sys, threading
used = set()
def note(frame, event, arg):
    if event == "call":
        code = frame.f_code
        if code.co_name != "<module>" and "/decoevo/" in code.co_filename:
            used.add(code.co_filename)
def write():
    files = {m: getattr(sys.modules.get(m), "__file__", None) for m in list(sys.modules) if m.startswith("decoevo")}
    with open(os.environ["IMPORT_USE_OUT"], "w") as out:
        json.dump({"used_files": sorted(used), "module_files": files}, out)
atexit.register(write)
sys.setprofile(note)
threading.setprofile(note)
sys.argv = ["decoevo", *json.loads(os.environ["IMPORT_USE_ARGV"])]
runpy.run_module("decoevo", run_name="__main__", alter_sys=True)
"""


def importable(name: str) -> bool:
    """A module a fresh `import name` loads again (not `__main__`, a frozen bootstrap or an interpreter-made name)."""
    if name == "__main__" or name.startswith("_frozen") or not all(p.isidentifier() for p in name.split(".")):
        return False
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def classify(first_call_modules: list[str], module_files: dict[str, str | None],
             used_files: set[str]) -> dict[str, Any]:
    """Each decoevo module loaded by the first call: used (a function of its own ran) or import only."""
    mine = [m for m in first_call_modules if m.startswith("decoevo")]
    used = [m for m in mine if module_files.get(m) in used_files]
    return {"modules": len(mine), "used": len(used), "import_only": [m for m in mine if m not in used]}


def trace_whole_run(env: dict[str, str], argv: list[str], out: Path) -> dict[str, Any]:
    traced = dict(env, IMPORT_USE_OUT=str(out), IMPORT_USE_ARGV=json.dumps(argv))
    done = subprocess.run([sys.executable, "-c", TRACER], env=traced, capture_output=True, text=True)
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"the traced run exited {done.returncode}:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", type=Path, default=RESULTS / "import_use.json")
    args = parser.parse_args(argv)

    from decoevo.testing.toy_server import toy_run_args, write_toy_questions

    env = tree_env(ROOT / "src")
    with toy_server() as url, tempfile.TemporaryDirectory(prefix="import-use-") as tmp_dir:
        tmp = Path(tmp_dir)
        data = write_toy_questions(tmp / "questions.jsonl")
        run_env = dict(env, DECOEVO_CACHE=str(tmp / "cache.sqlite"))
        _, _, probe = first_call(run_env, toy_run_args(url, data, tmp / "runs-probe", "probe"), tmp / "runs-probe")
        run_env["DECOEVO_CACHE"] = str(tmp / "cache-whole.sqlite")
        trace = trace_whole_run(run_env, toy_run_args(url, data, tmp / "runs-whole", "whole"), tmp / "trace.json")

    modules: list[str] = probe["modules"]
    use = classify(modules, trace["module_files"], set(trace["used_files"]))
    everything = [m for m in modules if m.startswith("decoevo") or importable(m)]
    not_decoevo = [m for m in everything if not m.startswith("decoevo")]
    sets = {"import set": everything, "import set without decoevo": not_decoevo}
    cpu: dict[str, list[float]] = {name: [] for name in sets}
    for _ in range(args.repeats):
        for name, names in sets.items():  # interleaved: both see the same load
            cpu[name].append(timed([sys.executable, "-c", f"import os, {', '.join(names)}; os._exit(0)"], env)[1])
    floor = {name: summary(samples) for name, samples in cpu.items()}
    share = statistics.median(cpu["import set"]) - statistics.median(cpu["import set without decoevo"])

    print(f"decoevo modules at the first paid call: {use['modules']}; used by the run: {use['used']}; "
          f"import only: {len(use['import_only'])}")
    for name in use["import_only"]:
        print(f"  import only: {name}")
    for name, row in floor.items():
        print(f"{name:<28} CPU min/median/max {row['min']:.3f} {row['median']:.3f} {row['max']:.3f} s")
    print(f"decoevo's own share (difference of the medians): {share:.3f} s")
    doc = {"machine": machine(), "load_average_end": os.getloadavg(), "repeats": args.repeats,
           "use": use, "cpu_s": floor, "samples": cpu, "decoevo_share_cpu_s": round(share, 4),
           "module_counts": {name: len(names) for name, names in sets.items()}}
    write_result(args.out, doc)
    return 0


if __name__ == "__main__":
    sys.exit(main())
