"""Every method at the `paper` preset against the simulated server: calls, tokens, waves, wall time.

Each cell (method × seed × code version) runs the same configuration three times, each with a fresh
request cache (so every distinct request is paid once, as in a real first run):

1. waves: in process (`SimBackend`) on a virtual clock, every call taking exactly 1 s and the client's
   own concurrency limit applied. The client's CPU costs no virtual time, so the virtual seconds are the
   dependency waves: the longest chain of calls each waiting for an earlier one (with the slot limit).
   Per outer round: the virtual seconds between the event before it and its `outer_round` event.
2. critical path: the same on the virtual clock, with the simulated latencies (base + per token + tail).
   That is the wall time the run would take if the client cost nothing.
3. wall: over HTTP against `SimServer` (its own process, 64 slots, the same latencies): wall time,
   client CPU per request, and, from the server, slot-seconds busy and requests in flight.
The simulated replies depend only on the request, so the three runs make the same calls.

`--before REV` also measures the code at git revision REV (its `src/`, extracted to a temporary
directory) in the same invocation, cell by cell interleaved with the current code, for a before/after
table measured under the same load.

    .venv/bin/python -m bench.scale.paper_scale                          # all 13 methods, seeds 0-2
    .venv/bin/python -m bench.scale.paper_scale --before HEAD~1 --methods decoevo,skillopt --seeds 0
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench._common import RESULTS, machine

ROOT = Path(__file__).resolve().parents[2]
KEYS = ("calls", "cache_hits", "tokens", "outer_rounds", "waves", "outer_round_waves", "critical_path_s", "wall_s",
        "wall_over_critical_path", "slot_utilisation", "in_flight_while_active", "max_in_flight", "requests",
        "rejected_429", "client_cpu_ms_per_request")


# ---- one cell, in its own process (PYTHONPATH selects the code version) -------------------------------
def _config(cell: dict[str, Any]) -> Any:
    from decoevo.engine.config import config_from_dict, deep_merge
    from decoevo.presets import PRESETS

    raw = deep_merge(PRESETS["paper"], {
        "method": cell["method"], "seed": cell["seed"], "data": {"path": cell["data"], "format": "jsonl"},
        "lm": {"models": {"default": {"backend": "openai", "base_url": cell["url"] + "/v1", "model": "sim"}}}})
    if cell.get("budget"):
        raw["budget"] = cell["budget"]
    return config_from_dict(raw)


async def _run(cell: dict[str, Any], workdir: Path, backend: Any) -> dict[str, Any]:
    from decoevo.engine.run import Engine
    from decoevo.lm import LM, RequestCache

    config = _config(cell)
    lm = LM(config.lm, backends={"default": backend} if backend is not None else None,
            cache=RequestCache(workdir / "cache.sqlite"))
    marks: list[tuple[str, float]] = []
    engine = Engine(config, workdir / "run", lm=lm,
                    observer=lambda event, state: marks.append((event.event, asyncio.get_running_loop().time())))
    t0, cpu0 = asyncio.get_running_loop().time(), time.process_time()
    try:
        result = await engine.run_async()
    finally:
        await lm.aclose()
    total = result.ledger.total()
    rounds = [t - marks[i - 1][1] for i, (kind, t) in enumerate(marks) if kind == "outer_round" and i > 0]
    return {"calls": total.calls, "cache_hits": total.cache_hits, "tokens": total.tokens,
            "outer_rounds": result.state.outer_rounds, "seconds": asyncio.get_running_loop().time() - t0,
            "cpu_s": time.process_time() - cpu0, "outer_round_seconds": rounds}


def _server(url: str, path: str, post: bool = False) -> dict[str, Any]:
    request = urllib.request.Request(url + path, data=b"{}" if post else None, method="POST" if post else "GET")
    with urllib.request.urlopen(request, timeout=30) as reply:
        out: dict[str, Any] = json.loads(reply.read())
        return out


def run_cell(cell: dict[str, Any]) -> dict[str, Any]:
    from decoevo.lm.client import make_backend
    from decoevo.testing.sim_backend import SimBackend, run_virtual
    from decoevo.testing.sim_model import LatencyModel

    latency = LatencyModel(**cell["latency"])
    limit = make_backend(_config(cell).lm.models["default"]).max_concurrency  # this code version's default
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        for sub in "wch":
            (base / sub).mkdir()
        waves, _ = run_virtual(_run(cell, base / "w", SimBackend(cell["sim_seed"], LatencyModel.fixed(1.0), limit)))
        path, _ = run_virtual(_run(cell, base / "c", SimBackend(cell["sim_seed"], latency, limit)))
        _server(cell["url"], "/sim/reset", post=True)
        wall = asyncio.run(_run(cell, base / "h", None))
        stats = _server(cell["url"], "/sim/stats")
    same = all(waves[k] == path[k] == wall[k] for k in ("calls", "tokens", "outer_rounds"))
    busy_s, slots, requests = stats["busy_slot_s"], cell["slots"], max(1, stats["requests"])
    return {
        "method": cell["method"], "seed": cell["seed"], "code": cell["code"], "client_concurrency": limit,
        "same_calls_in_all_three_runs": same, "calls": wall["calls"], "cache_hits": wall["cache_hits"],
        "tokens": wall["tokens"], "outer_rounds": wall["outer_rounds"], "waves": round(waves["seconds"]),
        "outer_round_waves": [round(s) for s in waves["outer_round_seconds"]],
        "critical_path_s": round(path["seconds"], 3), "wall_s": round(wall["seconds"], 3),
        "wall_over_critical_path": round(wall["seconds"] / path["seconds"], 3) if path["seconds"] else None,
        "slot_utilisation": round(busy_s / (slots * wall["seconds"]), 3) if wall["seconds"] else None,
        "in_flight_while_active": stats["mean_in_flight_while_active"], "max_in_flight": stats["max_in_flight"],
        "requests": stats["requests"], "rejected_429": stats["rejected_429"],
        "client_cpu_ms_per_request": round(1000 * wall["cpu_s"] / requests, 3),
    }


# ---- the driver -------------------------------------------------------------------------------------
def _serve_forever(config: dict[str, Any], urls: Any, stop: Any) -> None:
    from decoevo.testing.server import serve_app
    from decoevo.testing.sim_model import LatencyModel, SimWorld
    from decoevo.testing.sim_server import SimServer, SimServerConfig

    world = SimWorld(**config["world"]) if config.get("world") else None
    server = SimServer(SimServerConfig(seed=config["sim_seed"], slots=config["slots"],
                                       latency=LatencyModel(**config["latency"]), world=world))
    with serve_app(server.app()) as url:
        urls.put(url)
        stop.wait()


@contextmanager
def sim_server_process(config: dict[str, Any]) -> Iterator[str]:
    """The simulated server in its own process (its CPU is not the client's); yields its base URL."""
    ctx = mp.get_context("spawn")
    urls, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve_forever, args=(config, urls, stop), daemon=True)
    proc.start()
    try:
        yield str(urls.get(timeout=60))
    finally:
        stop.set()
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()


def extract_src(rev: str, into: Path) -> Path:
    """`src/` of git revision `rev`, written under `into`."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], check=True, capture_output=True).stdout
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def spawn_cell(cell: dict[str, Any], src: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{ROOT}"}  # that revision's decoevo; bench from here
    done = subprocess.run([sys.executable, "-m", "bench.scale.paper_scale", "--cell", json.dumps(cell)], env=env,
                          capture_output=True, text=True, timeout=3600, cwd=ROOT)
    if done.returncode != 0:
        raise RuntimeError(f"cell {cell['method']} seed {cell['seed']} ({cell['code']}) failed:\n{done.stderr[-3000:]}")
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def summarise(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """Per method: the mean over seeds of every number (outer-round waves pooled over rounds)."""
    rows: dict[str, Any] = {}
    for method in dict.fromkeys(c["method"] for c in cells):
        mine = [c for c in cells if c["method"] == method]
        row: dict[str, Any] = {"seeds": len(mine)}
        for key in KEYS:
            if key == "outer_round_waves":  # rounds that made no paid call (all replayed) are counted apart
                pooled = [w for c in mine for w in c[key] if w > 0]
                row["outer_round_waves_mean"] = round(statistics.fmean(pooled), 1) if pooled else None
                row["outer_round_waves_max"] = max(pooled) if pooled else None
                row["outer_rounds_without_calls"] = round(statistics.fmean(c[key].count(0) for c in mine), 2)
                continue
            values = [c[key] for c in mine if c[key] is not None]
            row[key] = round(statistics.fmean(values), 3) if values else None
        row["same_calls_in_all_three_runs"] = all(c["same_calls_in_all_three_runs"] for c in mine)
        rows[method] = row
    return rows


def main() -> None:
    from decoevo.methods import METHODS
    from decoevo.testing.toy_server import write_toy_questions

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell", help=argparse.SUPPRESS)
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--before", help="also measure the code at this git revision (its src/)")
    parser.add_argument("--after", help="measure this git revision's src/ instead of the working tree's")
    parser.add_argument("--base-ms", type=float, default=30.0, help="simulated latency: fixed part")
    parser.add_argument("--per-token-ms", type=float, default=0.1, help="simulated latency: per completion token")
    parser.add_argument("--tail-p", type=float, default=0.05, help="share of requests with a Pareto-tail delay")
    parser.add_argument("--slots", type=int, default=64)
    parser.add_argument("--questions", type=int, default=300)
    parser.add_argument("--out", type=Path, default=RESULTS / "paper_scale.json")
    args = parser.parse_args()
    if args.cell:
        print(json.dumps(run_cell(json.loads(args.cell))))
        return
    methods = [m for m in METHODS if m in args.methods.split(",")]  # decoevo before budget_matched
    seeds = [int(s) for s in args.seeds.split(",")]
    latency = {"base_s": args.base_ms / 1000, "per_token_s": args.per_token_ms / 1000, "tail_p": args.tail_p}
    server_config = {"sim_seed": 0, "slots": args.slots, "latency": latency}
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp, sim_server_process(server_config) as url:
        data = write_toy_questions(Path(tmp) / "questions.jsonl", args.questions)
        versions = {"after": extract_src(args.after, Path(tmp) / "after") if args.after else ROOT / "src"}
        if args.before:
            versions = {"before": extract_src(args.before, Path(tmp) / "before"), **versions}
        cells: dict[str, list[dict[str, Any]]] = {v: [] for v in versions}
        for seed in seeds:
            for method in methods:
                for code, src in versions.items():  # interleaved: before and after under the same load
                    cell = {**server_config, "method": method, "seed": seed, "code": code, "data": str(data),
                            "url": url}
                    if method == "budget_matched":  # SkillOpt steps up to the paired DecoEvo run's spend
                        deco = [c for c in cells[code] if c["method"] == "decoevo" and c["seed"] == seed]
                        if not deco:
                            continue
                        cell["budget"] = {"max_calls": deco[0]["calls"], "max_tokens": deco[0]["tokens"]}
                    out = spawn_cell(cell, src)
                    cells[code].append(out)
                    print(f"{code:6} {method:16} seed {seed}: {out['calls']:5} calls {out['tokens']:8} tokens "
                          f"{out['waves']:4} waves, wall {out['wall_s']:6.1f}s = {out['wall_over_critical_path']}"
                          f" x critical path, slots {out['slot_utilisation']}", flush=True)
                    write_report(args, methods, seeds, server_config, cells, started)  # partial results survive
    print(f"wrote {args.out} ({time.monotonic() - started:.0f}s)")


def write_report(args: argparse.Namespace, methods: list[str], seeds: list[int], server_config: dict[str, Any],
                 cells: dict[str, list[dict[str, Any]]], started: float) -> None:
    report: dict[str, Any] = {
        "config": {"preset": "paper", "methods": methods, "seeds": seeds, "questions": args.questions,
                   "server": server_config, "before": args.before, "after": args.after or "working tree"},
        "machine": machine(), "seconds": round(time.monotonic() - started, 1), "versions": {}}
    for code, mine in cells.items():
        rows = summarise(mine)
        ratio = None
        if "decoevo" in rows and "skillopt" in rows and rows["skillopt"]["calls"]:
            ratio = {k: round(rows["decoevo"][k] / rows["skillopt"][k], 3) for k in ("calls", "tokens")}
        report["versions"][code] = {"rows": rows, "decoevo_over_skillopt": ratio, "cells": mine}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
