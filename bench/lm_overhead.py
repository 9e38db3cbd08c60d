"""Orchestrator overhead of `decoevo.lm.LM` against an OpenAI-compatible server with a fixed delay.

Every chat completion is answered after `--delay-ms`; N distinct requests go through `LM.complete`
with `max_concurrency=C` and a fresh temporary cache (so every call is paid). The ideal wall time is
`ceil(N / C) * delay`; overhead % = wall / ideal - 1.

    .venv/bin/python bench/lm_overhead.py                 # server in its own process (default)
    .venv/bin/python bench/lm_overhead.py --server thread # server thread in the client's process
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from _common import RESULTS, ForeignLoad, machine, process_cpu_s, wait_until_quiet
from pydantic import BaseModel

from decoevo.lm import LM, GenParams, LMConfig, Message, ModelSpec, RequestCache
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import serve_app

DEFAULT_RUNS = "1:20,16:320,64:1280,64:1280:schema"


class Answer(BaseModel):
    answer: str
    score: int


class FixedDelay:
    """Picklable responder: a valid `Answer` JSON after a fixed delay (plain runs just get that text)."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s

    def __call__(self, body: dict[str, Any], n: int) -> Reply:
        return Reply(content=json.dumps({"answer": f"reply {n}", "score": n % 10}), delay_s=self.delay_s)


def _serve_forever(delay_s: float, urls: Any, stop: Any) -> None:
    with serve_app(FakeOpenAI(FixedDelay(delay_s)).app()) as url:
        urls.put(url)
        stop.wait()


@contextmanager
def fake_server(delay_s: float, mode: str) -> Iterator[tuple[str, int | None]]:
    """Yield the base URL of a fixed-delay server, in a thread of this process or in a child process,
    and the child's pid (None for a thread)."""
    if mode == "thread":
        with serve_app(FakeOpenAI(FixedDelay(delay_s)).app()) as url:
            yield url, None
        return
    ctx = mp.get_context("spawn")
    urls, stop = ctx.Queue(), ctx.Event()
    proc = ctx.Process(target=_serve_forever, args=(delay_s, urls, stop), daemon=True)
    proc.start()
    try:
        yield str(urls.get(timeout=60)), proc.pid
    finally:
        stop.set()
        proc.join(timeout=10)
        if proc.is_alive():
            proc.terminate()


@dataclass
class RunResult:
    concurrency: int
    calls: int
    schema: bool
    wall_s: float  # median over repeats
    ideal_s: float
    overhead_pct: float
    client_cpu_ms_per_call: float  # includes the server's when it runs in a thread of this process
    server_cpu_ms_per_call: float | None  # server in its own process only
    foreign_cpu_s: float | None  # worst repeat: CPU used by other processes on the machine meanwhile
    walls_s: list[float]


@dataclass
class Repeat:
    wall_s: float
    client_cpu_s: float
    server_cpu_s: float | None
    foreign_cpu_s: float | None


async def _one_run(url: str, server_pid: int | None, cache: Path, concurrency: int, calls: int,
                   schema: bool, tag: str) -> Repeat:
    spec = ModelSpec(backend="openai", model="fake", base_url=f"{url}/v1", max_concurrency=concurrency)
    lm = LM(LMConfig(models={"default": spec}), cache=RequestCache(cache))
    kind = Answer if schema else None
    params = GenParams(max_tokens=64)

    async def call(i: int, prefix: str) -> None:
        await lm.complete([Message("user", f"{prefix} request {i}")], role="bench", schema=kind, params=params)

    await asyncio.gather(*(call(i, f"{tag} warm-up") for i in range(concurrency)))  # open the connections
    server0 = process_cpu_s(server_pid) if server_pid else None
    with ForeignLoad([server_pid] if server_pid else []) as load:
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(call(i, tag) for i in range(calls)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server = process_cpu_s(server_pid) - server0 if server_pid and server0 is not None else None
    total = lm.ledger.total()
    assert total.calls == calls + concurrency and total.cache_hits == 0, "every call must be paid"
    await lm.aclose()
    return Repeat(wall, cpu, server, load.foreign_s)


def measure(url: str, server_pid: int | None, concurrency: int, calls: int, schema: bool, delay_s: float,
            repeats: int, quiet_timeout_s: float) -> RunResult:
    reps: list[Repeat] = []
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeats):
            wait_until_quiet(timeout_s=quiet_timeout_s)
            tag = f"c{concurrency}-n{calls}-{'schema' if schema else 'text'}-{r}"
            reps.append(asyncio.run(_one_run(url, server_pid, Path(tmp) / f"{tag}.sqlite", concurrency, calls,
                                             schema, tag)))
    wall = statistics.median(r.wall_s for r in reps)
    ideal = math.ceil(calls / concurrency) * delay_s
    per_call = 1000 / calls
    servers = [r.server_cpu_s for r in reps if r.server_cpu_s is not None]
    foreign = [r.foreign_cpu_s for r in reps if r.foreign_cpu_s is not None]
    return RunResult(concurrency, calls, schema, round(wall, 4), round(ideal, 4), round(100 * (wall / ideal - 1), 2),
                     round(per_call * statistics.median(r.client_cpu_s for r in reps), 3),
                     round(per_call * statistics.median(servers), 3) if servers else None,
                     max(foreign) if foreign else None, [round(r.wall_s, 4) for r in reps])


def parse_runs(text: str) -> list[tuple[int, int, bool]]:
    runs = []
    for item in text.split(","):
        parts = item.split(":")
        runs.append((int(parts[0]), int(parts[1]), len(parts) > 2 and parts[2] == "schema"))
    return runs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay-ms", type=float, default=200.0, help="server delay per completion")
    ap.add_argument("--runs", default=DEFAULT_RUNS, help="comma-separated C:N[:schema] (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per run; the median wall time is reported")
    ap.add_argument("--server", choices=["process", "thread"], default="process",
                    help="run the fake server in a child process or in a thread of this process")
    ap.add_argument("--quiet-timeout", type=float, default=600.0,
                    help="before each repeat wait up to this many seconds for other CPU load to stop")
    ap.add_argument("--out", type=Path, default=RESULTS / "lm_overhead.json")
    args = ap.parse_args()
    delay_s = args.delay_ms / 1000
    results = []
    with fake_server(delay_s, args.server) as (url, pid):
        for concurrency, calls, schema in parse_runs(args.runs):
            r = measure(url, pid, concurrency, calls, schema, delay_s, args.repeats, args.quiet_timeout)
            results.append(r)
            print(f"  C={concurrency} N={calls} schema={schema}: walls {r.walls_s}", flush=True)
    print(f"\nLM overhead, server delay {args.delay_ms:.0f} ms, server in a {args.server}, "
          f"median of {args.repeats}")
    print(f"{'C':>4} {'calls':>6} {'schema':>6} {'ideal s':>8} {'wall s':>8} {'overhead':>9} "
          f"{'client ms/call':>14} {'server ms/call':>14} {'other cpu s':>11}")
    for r in results:
        server = f"{r.server_cpu_ms_per_call:.2f}" if r.server_cpu_ms_per_call is not None else "-"
        foreign = f"{r.foreign_cpu_s:.2f}" if r.foreign_cpu_s is not None else "-"
        print(f"{r.concurrency:>4} {r.calls:>6} {'yes' if r.schema else 'no':>6} {r.ideal_s:>8.2f} "
              f"{r.wall_s:>8.3f} {r.overhead_pct:>8.1f}% {r.client_cpu_ms_per_call:>14.2f} {server:>14} "
              f"{foreign:>11}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "lm_overhead",
        "delay_ms": args.delay_ms,
        "server": args.server,
        "repeats": args.repeats,
        "machine": machine(),
        "results": [asdict(r) for r in results],
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
