"""Client CPU per paid call in a whole `decoevo run`, as users run it (issue 47 item 1).

`bench/client/lm_overhead.py` measures `LM.complete` alone. This measures the whole command: `python -m decoevo
run --preset paper` (DecoEvo) in its own process, on a pseudo-terminal (so the progress line is drawn as in a
user's terminal), against the simulated OpenAI-compatible server (`decoevo.testing.sim_server`, its own process,
every reply after a fixed delay, more slots than the client sends at once) with a fresh request cache (every
distinct request paid once) and an API key set (so the redaction a user's run does is done here too).

For each reply latency, client concurrency, seed and code tree (`--before REV` measures REV's src/ too, cells
interleaved so both see the same load):
  cpu_ms_per_paid_call   (user + system CPU of the run's process, from wait4's rusage, minus its start-up CPU)
                         ÷ the paid calls its calls.jsonl records
  start-up               the same command stopped at its first chat-completion request (bench/client/startup.py's
                         probe): CPU and wall before any call, the median of `--startup-repeats`
  wall_over_critical_path  (the run's wall − its start-up wall) ÷ the critical path: the same run configuration
                         (the run's own config.yaml) on a virtual clock where every call takes exactly the reply
                         latency and the client costs nothing (`SimBackend`, the run's concurrency limit applied)
With `--profile`, one more run per tree and configuration under cProfile (CPU clock, main thread): every
function's own time is put in a layer (run directory, redaction, progress, JSON, HTTP client, event loop, ...)
by its module; a function of no layer's module (a builtin, the standard library) gives its time to its callers'
layers in proportion to the time spent under each. cProfile's cost is per function call, so it inflates code made
of many small calls (rich's rendering ~8×, measured against a timer around the same functions) against code that
spends its time in C (SQLite, zlib, the JSON encoder): read its shares as where calls go, not as CPU.
With `--sample`, one more run per tree and configuration under py-spy (the `bench` extra; sampling every thread at
200 Hz, so the run's own code is not slowed call by call): each sample goes to the layer of its innermost frame
that has one, a sample taken under an import to start-up, and a thread waiting (on a lock: rich's refresh thread
between redraws; or the event loop polling its sockets), which py-spy counts as active at times, is left out. The
shares of the samples after start-up, times the tree's median CPU per paid call, are that CPU by layer.

    .venv/bin/python -m bench.client.run_cpu                                    # 20/30/200 ms, C 256, seeds 0-2
    .venv/bin/python -m bench.client.run_cpu --before HEAD~3 --profile --out bench/results/run_cpu.json
    .venv/bin/python -m bench.client.run_cpu --latencies-ms 20 --sample --out bench/results/run_cpu_sampled.json
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import pstats
import pty
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine
from bench.client.startup import first_call, tree_env
from bench.scale.paper_scale import extract_src, sim_server_process

ROOT = Path(__file__).resolve().parents[2]
API_KEY = "sk-bench-" + "k3y" * 12  # what a user's key looks like to the redaction (never sent anywhere real)
PROFILED = """
import cProfile, os, runpy, sys, time
sys.argv = ["decoevo", *sys.argv[2:]]
profile = cProfile.Profile(time.process_time)
profile.enable()
try:
    runpy.run_module("decoevo", run_name="__main__", alter_sys=True)
except SystemExit:
    pass
finally:
    profile.disable()
    profile.dump_stats(os.environ["RUN_CPU_PROFILE"])
"""


# ---- one `decoevo run`, as users run it ----------------------------------------------------------------
def run_argv(url: str, data: Path, runs_root: Path, seed: int, concurrency: int) -> list[str]:
    return ["run", "--preset", "paper", "--method", "decoevo", "--seeds", str(seed), "--data", str(data),
            "--base-url", f"{url}/v1", "--model", "sim", "--concurrency", str(concurrency),
            "--runs-root", str(runs_root), "--name", "run"]


def _drain(fd: int, tail: list[bytes]) -> None:
    """Read the terminal's output until the child closes it (keeping the last few KiB for an error)."""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            return
        if not chunk:
            return
        tail.append(chunk)
        if len(tail) > 64:
            del tail[:32]


def on_terminal(cmd: list[str], env: dict[str, str]) -> tuple[float, float, int, str]:
    """(wall s, CPU s from the child's rusage, exit code, the tail of its output) of `cmd` run on a
    120-column pseudo-terminal, as a user's terminal shows it."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    env = dict(env, TERM="xterm-256color")
    env.pop("COLUMNS", None)
    env.pop("NO_COLOR", None)
    tail: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(master, tail), daemon=True)
    reader.start()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=ROOT,
                            start_new_session=True)
    os.close(slave)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(timeout=10)
    os.close(master)
    return wall, usage.ru_utime + usage.ru_stime, proc.returncode, b"".join(tail).decode("utf-8", "replace")[-3000:]


def paid_calls(run_dir: Path) -> tuple[int, int]:
    """(paid calls, cache hits) from the run's call log."""
    paid = hits = 0
    for line in (run_dir / "calls.jsonl").read_bytes().splitlines():
        if line.strip():
            cached = json.loads(line).get("cached")
            hits += bool(cached)
            paid += not cached
    return paid, hits


# ---- the critical path: the run's configuration on a virtual clock --------------------------------------
def critical_path(config_yaml: Path, latency_s: float, limit: int, workdir: Path) -> dict[str, Any]:
    """Run in a child with the tree's PYTHONPATH (`--critical`): seconds on the virtual clock and the calls."""
    import asyncio

    import yaml

    from decoevo.engine.config import config_from_dict
    from decoevo.engine.run import Engine
    from decoevo.lm import LM, RequestCache
    from decoevo.testing.sim_backend import SimBackend, run_virtual
    from decoevo.testing.sim_model import LatencyModel

    config = config_from_dict(yaml.safe_load(config_yaml.read_text(encoding="utf-8")))

    async def go() -> dict[str, Any]:
        backend = SimBackend(0, LatencyModel.fixed(latency_s), limit)
        lm = LM(config.lm, backends={"default": backend}, cache=RequestCache(workdir / "cache.sqlite"))
        t0 = asyncio.get_running_loop().time()
        try:
            result = await Engine(config, workdir / "run", lm=lm).run_async()
        finally:
            await lm.aclose()
        total = result.ledger.total()
        return {"seconds": asyncio.get_running_loop().time() - t0, "calls": total.calls}

    out, _ = run_virtual(go())
    return out


def spawn_critical(env: dict[str, str], config_yaml: Path, latency_s: float, limit: int, workdir: Path
                   ) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "bench.client.run_cpu", "--critical",
                           json.dumps([str(config_yaml), latency_s, limit, str(workdir)])],
                          env=env, cwd=ROOT, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise SystemExit(f"critical path failed:\n{done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


# ---- the profile, by layer --------------------------------------------------------------------------------
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("redaction", ("decoevo/redact.py", "decoevo/lm/backend_secrets.py")),
    ("progress line", ("decoevo/cli/run_progress.py", "/rich/")),
    ("request journal", ("decoevo/rundir/requests.py", "decoevo/lm/journal.py")),
    ("run directory", ("decoevo/rundir/", "/gzip.py", "/pathlib.py")),
    ("JSON encode/parse/validate", ("/json/", "/pydantic/", "/pydantic_core/", "_json", "pydantic_core",
                                    "decoevo/lm/structured.py", "decoevo/lm/reply.py")),
    ("HTTP client", ("/aiohttp/", "/yarl/", "/multidict/", "/propcache/", "decoevo/lm/openai_backend.py",
                     "decoevo/lm/bounded_body.py", "decoevo/lm/http1.py", "decoevo/lm/proxied.py", "/ssl.py",
                     "/http/")),
    ("event loop", ("/asyncio/", "/selectors.py", "/uvloop/", "decoevo/aio.py")),
    ("request cache", ("decoevo/lm/cache.py", "sqlite3")),
    ("LM layer (ledger, budget, retries, limits)", ("decoevo/lm/",)),
    ("engine and methods", ("decoevo/",)),
    ("imports (start-up)", ("<frozen", "importlib", "/site-packages/", "/lib/python")),
)


# Functions that only turn a value into JSON text or back, by pydantic-core (round ten): its C work shows in a
# sample as the calling Python frame, so these frames are the JSON layer's, not their module's. (The secret
# scan's encoding, redact.py's `_tree_holds_any`, stays with redaction: that function does more.)
JSON_FUNCTIONS: tuple[tuple[str, str], ...] = (
    ("decoevo/rundir/files.py", "dumps_json_line"), ("decoevo/lm/openai_backend.py", "body_bytes"),
    ("decoevo/lm/openai_backend.py", "parse_json"), ("decoevo/lm/cache.py", "_messages_text"))


def layer_of(func: tuple[str, int, str]) -> str | None:
    filename, _, name = func
    where = filename if filename != "~" else name
    if filename.startswith("<frozen importlib") or "importlib" in filename:
        return "imports (start-up)"
    if any(path in where and name.split(".")[-1] == function for path, function in JSON_FUNCTIONS):
        return "JSON encode/parse/validate"
    for layer, marks in LAYERS:
        if layer == "imports (start-up)":
            continue  # the standard library and packages of no layer give their time to their callers
        if any(m in where for m in marks):
            return layer
    return None


def by_layer(profile: Path) -> dict[str, float]:
    """Seconds of own CPU time per layer (see the module's note)."""
    stats: dict[Any, Any] = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    share_cache: dict[Any, dict[str, float]] = {}

    def shares(func: Any, depth: int = 0) -> dict[str, float]:
        """How one second of `func`'s own time divides among layers."""
        if func in share_cache:
            return share_cache[func]
        layer = layer_of(func)
        if layer is not None:
            out = {layer: 1.0}
        else:
            callers = stats[func][4] if func in stats else {}
            weights = {c: edge[3] for c, edge in callers.items() if c != func}
            total = sum(weights.values())
            if depth > 40 or not weights or total <= 0:
                out = {"other (standard library, builtins)": 1.0}
            else:
                out = defaultdict(float)
                for caller, weight in weights.items():
                    for name, part in shares(caller, depth + 1).items():
                        out[name] += part * weight / total
                out = dict(out)
        share_cache[func] = out
        return out

    seconds: dict[str, float] = defaultdict(float)
    for func, (_, _, own, _, _) in stats.items():
        for name, part in shares(func).items():
            seconds[name] += own * part
    return dict(sorted(seconds.items(), key=lambda kv: -kv[1]))



SAMPLE_HZ = 200
STARTUP = "imports (start-up)"
_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*?):(?P<line>\d+)\)$")


def py_spy() -> str:
    found = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(found).exists():
        raise SystemExit("--sample needs py-spy: pip install -e '.[bench]'")
    return found


def _waiting(leaf: re.Match[str]) -> bool:
    """A frame that waits: `threading` (a lock, an event: rich's refresh thread between redraws) or the event
    loop's poll of its sockets. py-spy counts some of these samples as active (the loop's `epoll_wait` at
    200 ms replies: ~4.6 s of samples where cProfile's CPU clock saw 0.2 s)."""
    return leaf["file"].endswith("/threading.py") or (leaf["file"].endswith("/selectors.py")
                                                        and leaf["func"].endswith(".select"))


def sampled_layers(raw: Path) -> dict[str, int]:
    """Samples per layer from py-spy's raw output (`thread (ID): NAME;frame;frame;... COUNT` a line, each
    frame `function (file:line)`): see the module's note."""
    samples: dict[str, int] = defaultdict(int)
    for line in raw.read_text(encoding="utf-8", errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        frames = [m for part in stack.split(";")[1:] if (m := _FRAME.match(part))]
        if not frames or _waiting(frames[-1]):
            continue  # a thread waiting (on a lock, or the loop on its sockets) is idle, whatever py-spy thought
        if any("importlib._bootstrap" in m["file"] for m in frames):
            layer: str | None = STARTUP
        else:
            layer = next((found for m in reversed(frames)
                          if (found := layer_of((m["file"], 0, m["func"]))) not in (None, STARTUP)), None)
        samples[layer or "other (standard library, builtins)"] += int(count)
    return dict(sorted(samples.items(), key=lambda kv: -kv[1]))


def sampled_summary(samples: dict[str, int], cpu_ms_per_paid_call: float) -> dict[str, Any]:
    """Shares of the samples after start-up, and those shares of the measured CPU per paid call."""
    running = {k: v for k, v in samples.items() if k != STARTUP}
    total = sum(running.values()) or 1
    return {"samples": samples, "share": {k: round(v / total, 4) for k, v in running.items()},
            "ms_per_paid_call": {k: round(cpu_ms_per_paid_call * v / total, 4) for k, v in running.items()}}

# ---- the driver --------------------------------------------------------------------------------------------
def summary(values: list[float], digits: int = 3) -> dict[str, Any]:
    return {"min": round(min(values), digits), "median": round(statistics.median(values), digits),
            "max": round(max(values), digits), "each": [round(v, digits) for v in values]}


def measure_cell(tree: str, src: Path, url: str, data: Path, tmp: Path, seed: int, concurrency: int,
                 latency_s: float, startup: dict[str, float], profile: Path | None = None,
                 sample: Path | None = None) -> dict[str, Any]:
    env = tree_env(src)
    env["PYTHONPATH"] = f"{src}{os.pathsep}{ROOT}"
    env["OPENAI_API_KEY"] = API_KEY
    work = tmp / f"cell-{tree}-{seed}-{time.monotonic_ns()}"
    work.mkdir()
    env["DECOEVO_CACHE"] = str(work / "cache.sqlite")
    argv = run_argv(url, data, work / "runs", seed, concurrency)
    if profile is not None:
        env["RUN_CPU_PROFILE"] = str(profile)
        cmd = [sys.executable, "-c", PROFILED, "--", *argv]
    else:
        cmd = [sys.executable, "-m", "decoevo", *argv]
    if sample is not None:
        cmd = [py_spy(), "record", "--rate", str(SAMPLE_HZ), "--format", "raw", "--threads", "--full-filenames",
               "--output", str(sample), "--", *cmd]
    wall, cpu, code, tail = on_terminal(cmd, env)
    if code != 0:
        raise SystemExit(f"{tree} seed {seed}: decoevo run exited {code}:\n{tail}")
    run_dir = work / "runs" / "run"
    paid, hits = paid_calls(run_dir)
    out: dict[str, Any] = {"tree": tree, "seed": seed, "paid_calls": paid, "cache_hits": hits,
                           "wall_s": round(wall, 3), "cpu_s": round(cpu, 3),
                           "load_average_1min": round(os.getloadavg()[0], 2)}
    if profile is None and sample is None:
        path = spawn_critical(env, run_dir / "config.yaml", latency_s, concurrency, work / "virtual")
        run_wall = wall - startup["wall_s"]
        out.update(critical_path_s=round(path["seconds"], 3), same_calls=path["calls"] == paid,
                   cpu_ms_per_paid_call=round(1000 * (cpu - startup["cpu_s"]) / paid, 4),
                   wall_over_critical_path=round(run_wall / path["seconds"], 3))
    shutil.rmtree(work, ignore_errors=True)
    return out


def measure_startup(src: Path, url: str, data: Path, tmp: Path, concurrency: int, repeats: int
                    ) -> dict[str, Any]:
    env = tree_env(src)
    env["PYTHONPATH"] = f"{src}{os.pathsep}{ROOT}"
    env["OPENAI_API_KEY"] = API_KEY
    walls, cpus = [], []
    for i in range(repeats):
        work = tmp / f"startup-{i}-{time.monotonic_ns()}"
        work.mkdir()
        env["DECOEVO_CACHE"] = str(work / "cache.sqlite")
        wall, cpu, _ = first_call(env, run_argv(url, data, work / "runs", 0, concurrency), work / "runs")
        walls.append(wall)
        cpus.append(cpu)
        shutil.rmtree(work, ignore_errors=True)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus),
            "wall": summary(walls), "cpu": summary(cpus)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--critical", help=argparse.SUPPRESS)
    parser.add_argument("--latencies-ms", default="20,30,200")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--startup-repeats", type=int, default=3)
    parser.add_argument("--before", help="also measure this git revision's src/ (cells interleaved)")
    parser.add_argument("--after", help="measure this git revision's src/ instead of the working tree's (a fixed "
                        "snapshot: editing the tree meanwhile changes nothing measured)")
    parser.add_argument("--profile", action="store_true", help="one more run per tree and latency, under cProfile")
    parser.add_argument("--profile-dir", type=Path,
                        help="keep the --profile runs' cProfile files and the --sample runs' py-spy samples here")
    parser.add_argument("--sample", action="store_true", help="one more run per tree and latency, sampled by py-spy")
    parser.add_argument("--out", type=Path, default=RESULTS / "run_cpu.json")
    args = parser.parse_args(argv)
    if args.critical:
        config_yaml, latency_s, limit, workdir = json.loads(args.critical)
        print(json.dumps(critical_path(Path(config_yaml), latency_s, limit, Path(workdir))))
        return 0
    from decoevo.testing.toy_server import write_toy_questions

    seeds = [int(s) for s in args.seeds.split(",")]
    started = time.monotonic()
    doc: dict[str, Any] = {"machine": machine(), "preset": "paper", "method": "decoevo",
                           "concurrency": args.concurrency, "questions": args.questions, "seeds": seeds,
                           "before": args.before, "after": args.after or "working tree", "latencies": {}}
    with tempfile.TemporaryDirectory(prefix="run-cpu-") as tmp_name:
        tmp = Path(tmp_name)
        data = write_toy_questions(tmp / "questions.jsonl", args.questions)
        trees = {"after": extract_src(args.after, tmp / "after") if args.after else ROOT / "src"}
        if args.before:
            trees = {"before": extract_src(args.before, tmp / "before"), **trees}
        for latency_ms in [float(x) for x in args.latencies_ms.split(",")]:
            server = {"sim_seed": 0, "slots": max(1024, 4 * args.concurrency),
                      "latency": {"base_s": latency_ms / 1000, "per_token_s": 0.0, "tail_p": 0.0}}
            row: dict[str, Any] = {"trees": {}}
            with sim_server_process(server) as url:
                startup = {tree: measure_startup(src, url, data, tmp, args.concurrency, args.startup_repeats)
                           for tree, src in trees.items()}
                cells: dict[str, list[dict[str, Any]]] = {tree: [] for tree in trees}
                for i, seed in enumerate(seeds):
                    order = list(trees) if i % 2 == 0 else list(reversed(trees))
                    for tree in order:
                        cell = measure_cell(tree, trees[tree], url, data, tmp, seed, args.concurrency,
                                            latency_ms / 1000, startup[tree])
                        cells[tree].append(cell)
                        print(f"{latency_ms:5.0f} ms  {tree:<6} seed {seed}: {cell['paid_calls']} paid, "
                              f"{cell['cpu_ms_per_paid_call']:.3f} ms CPU/paid call, wall ÷ critical path "
                              f"{cell['wall_over_critical_path']:.3f}", flush=True)
                profiles: dict[str, Any] = {}
                sampled: dict[str, Any] = {}
                if args.sample:
                    for tree, src in trees.items():
                        path = tmp / f"sample-{tree}.txt"
                        cell = measure_cell(tree, src, url, data, tmp, seeds[0], args.concurrency,
                                            latency_ms / 1000, startup[tree], sample=path)
                        median = statistics.median(c["cpu_ms_per_paid_call"] for c in cells[tree])
                        sampled[tree] = sampled_summary(sampled_layers(path), median)
                        if args.profile_dir is not None:
                            args.profile_dir.mkdir(parents=True, exist_ok=True)
                            shutil.copy(path, args.profile_dir / f"{latency_ms:g}ms-{tree}.py-spy.txt")
                if args.profile:
                    for tree, src in trees.items():
                        path = tmp / f"profile-{tree}.prof"
                        cell = measure_cell(tree, src, url, data, tmp, seeds[0], args.concurrency,
                                            latency_ms / 1000, startup[tree], profile=path)
                        layers = by_layer(path)
                        if args.profile_dir is not None:
                            args.profile_dir.mkdir(parents=True, exist_ok=True)
                            shutil.copy(path, args.profile_dir / f"{latency_ms:g}ms-{tree}.prof")
                        total = sum(layers.values())
                        profiles[tree] = {
                            "paid_calls": cell["paid_calls"], "profiled_cpu_s": round(total, 3),
                            "ms_per_paid_call": {k: round(1000 * v / cell["paid_calls"], 4) for k, v in layers.items()},
                            "share": {k: round(v / total, 4) for k, v in layers.items()}}
            for tree in trees:
                mine = cells[tree]
                row["trees"][tree] = {
                    "startup": startup[tree],
                    "cpu_ms_per_paid_call": summary([c["cpu_ms_per_paid_call"] for c in mine], 4),
                    "wall_over_critical_path": summary([c["wall_over_critical_path"] for c in mine]),
                    "paid_calls": summary([c["paid_calls"] for c in mine], 0),
                    "same_calls_as_critical_path": all(c["same_calls"] for c in mine),
                    "cells": mine, **({"profile": profiles[tree]} if tree in profiles else {}),
                    **({"sampled": sampled[tree]} if tree in sampled else {})}
            if args.before:
                b, a = row["trees"]["before"], row["trees"]["after"]
                row["ratio_after_over_before"] = {
                    k: round(a[k]["median"] / b[k]["median"], 3) for k in ("cpu_ms_per_paid_call",
                                                                          "wall_over_critical_path")}
            doc["latencies"][f"{latency_ms:g}ms"] = row
            doc["seconds"] = round(time.monotonic() - started, 1)
            args.out.parent.mkdir(parents=True, exist_ok=True)
            args.out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")  # partial results survive
    for key, row in doc["latencies"].items():
        for tree, got in row["trees"].items():
            c, w = got["cpu_ms_per_paid_call"], got["wall_over_critical_path"]
            print(f"{key:>6} {tree:<6} CPU/paid call ms min/median/max {c['min']:.3f}/{c['median']:.3f}/{c['max']:.3f}"
                  f"  wall ÷ critical path {w['min']:.3f}/{w['median']:.3f}/{w['max']:.3f}")
            for kind in ("profile", "sampled"):
                for layer, ms in got.get(kind, {}).get("ms_per_paid_call", {}).items():
                    print(f"{'':>6} {kind:<7} {layer:<44} {ms:.4f} ms")
        if "ratio_after_over_before" in row:
            print(f"{'':>6} after ÷ before: {row['ratio_after_over_before']}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
