"""Orchestrator overhead of `decoevo.lm.LM` against an OpenAI-compatible server with a fixed delay.

Every chat completion is answered after `--delay-ms`; N distinct requests go through `LM.complete`
with `max_concurrency=C` and a fresh temporary cache (so every call is paid). The ideal wall time is
`ceil(N / C) * delay`; overhead % = wall / ideal - 1. Runs are C:N[:variant]; variants:
  text     LM.complete, plain text (default)     schema   LM.complete with a pydantic schema
  nocache  LM.complete with use_cache=false      http     the SDK's HTTP client alone, no LM
  floor    a minimal raw-socket HTTP/1.1 client: what the fake server and the kernel cost

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
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import openai
from _common import RESULTS, ForeignLoad, machine, process_cpu_s, wait_until_quiet
from _fake_server import fake_server
from pydantic import BaseModel

from decoevo.lm import LM, GenParams, LMConfig, Message, ModelSpec, RequestCache

DEFAULT_RUNS = "1:20,16:320,64:1280,64:1280:schema,64:1280:nocache,64:1280:http,64:1280:floor"


class Answer(BaseModel):
    answer: str
    score: int


Call = Callable[[str], Awaitable[None]]


async def _client(variant: str, url: str, concurrency: int, cache: Path) -> tuple[Call, LM | None, Callable[[], Any]]:
    """The function that makes one request, the LM (if any) and how to close the client afterwards."""
    if variant in ("text", "schema", "nocache"):
        spec = ModelSpec(backend="openai", model="fake", base_url=f"{url}/v1", max_concurrency=concurrency)
        lm = LM(LMConfig(models={"default": spec}, use_cache=variant != "nocache"),
                cache=RequestCache(cache) if variant != "nocache" else None)
        kind, params = (Answer if variant == "schema" else None), GenParams(max_tokens=64)

        async def lm_call(text: str) -> None:
            await lm.complete([Message("user", text)], role="bench", schema=kind, params=params)

        return lm_call, lm, lm.aclose
    sem = asyncio.Semaphore(concurrency)
    if variant == "http":
        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=concurrency,
                                                       max_keepalive_connections=concurrency)
        http = openai.DefaultAsyncHttpxClient(limits=limits)

        async def http_call(text: str) -> None:
            async with sem:
                body = {"model": "fake", "messages": [{"role": "user", "content": text}], "max_tokens": 64}
                json.loads((await http.post(f"{url}/v1/chat/completions", json=body)).content)

        return http_call, None, http.aclose
    host, port = url.removeprefix("http://").split(":")
    pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    conns = [await asyncio.open_connection(host, int(port)) for _ in range(concurrency)]
    for conn in conns:
        pool.put_nowait(conn)

    async def floor_call(text: str) -> None:
        reader, writer = await pool.get()
        body = json.dumps({"model": "fake", "messages": [{"role": "user", "content": text}]}).encode()
        writer.write(b"POST /v1/chat/completions HTTP/1.1\r\nhost: %s\r\ncontent-type: application/json\r\n"
                     b"content-length: %d\r\n\r\n%s" % (host.encode(), len(body), body))
        head = (await reader.readuntil(b"\r\n\r\n")).lower()
        length = int(head.split(b"content-length:")[1].split(b"\r\n")[0])
        json.loads(await reader.readexactly(length))
        pool.put_nowait((reader, writer))

    async def close() -> None:
        for _, writer in conns:
            writer.close()

    return floor_call, None, close


@dataclass
class Repeat:
    wall_s: float
    client_cpu_s: float
    server_cpu_s: float | None
    foreign_cpu_s: float | None


async def _one_run(url: str, server_pid: int | None, cache: Path, concurrency: int, calls: int, variant: str,
                   tag: str) -> Repeat:
    call, lm, close = await _client(variant, url, concurrency, cache)
    await asyncio.gather(*(call(f"{tag} warm-up {i}") for i in range(concurrency)))  # open the connections
    server0 = process_cpu_s(server_pid) if server_pid else 0.0
    with ForeignLoad([server_pid] if server_pid else []) as load:
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(call(f"{tag} request {i}") for i in range(calls)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server = process_cpu_s(server_pid) - server0 if server_pid else None
    if lm is not None:
        total = lm.ledger.total()
        assert total.calls == calls + concurrency and total.cache_hits == 0, "every call must be paid"
    await close()
    return Repeat(wall, cpu, server, load.foreign_s)


@dataclass
class RunResult:
    concurrency: int
    calls: int
    variant: str
    wall_s: float  # median over clean repeats
    ideal_s: float
    overhead_pct: float
    client_cpu_ms_per_call: float  # includes the server's when it runs in a thread of this process
    server_cpu_ms_per_call: float | None  # server in its own process only
    foreign_cpu_s: float | None  # worst kept repeat: CPU used by other processes on the machine meanwhile
    discarded: int  # repeats thrown away because other processes used the CPU meanwhile
    walls_s: list[float]


def measure(url: str, server_pid: int | None, concurrency: int, calls: int, variant: str, args: argparse.Namespace,
            cores: int) -> RunResult:
    reps: list[Repeat] = []
    discarded = 0
    with tempfile.TemporaryDirectory() as tmp:
        while len(reps) < args.repeats:
            wait_until_quiet(timeout_s=args.quiet_timeout)
            tag = f"c{concurrency}-n{calls}-{variant}-{len(reps) + discarded}"
            rep = asyncio.run(_one_run(url, server_pid, Path(tmp) / f"{tag}.sqlite", concurrency, calls, variant, tag))
            noisy = rep.foreign_cpu_s is not None and rep.foreign_cpu_s > args.max_foreign * rep.wall_s * cores
            if noisy and discarded < args.max_discards:
                discarded += 1
                print(f"  discarded a repeat: other processes used {rep.foreign_cpu_s:.2f} CPU s", flush=True)
                continue
            reps.append(rep)
    wall = statistics.median(r.wall_s for r in reps)
    ideal = math.ceil(calls / concurrency) * args.delay_ms / 1000
    servers = [r.server_cpu_s for r in reps if r.server_cpu_s is not None]
    foreign = [r.foreign_cpu_s for r in reps if r.foreign_cpu_s is not None]
    return RunResult(concurrency, calls, variant, round(wall, 4), round(ideal, 4), round(100 * (wall / ideal - 1), 2),
                     round(1000 / calls * statistics.median(r.client_cpu_s for r in reps), 3),
                     round(1000 / calls * statistics.median(servers), 3) if servers else None,
                     max(foreign) if foreign else None, discarded, [round(r.wall_s, 4) for r in reps])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay-ms", type=float, default=200.0, help="server delay per completion")
    ap.add_argument("--runs", default=DEFAULT_RUNS, help="comma-separated C:N[:variant] (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=3, help="repeats per run; the median wall time is reported")
    ap.add_argument("--server", choices=["process", "thread"], default="process",
                    help="run the fake server in a child process or in a thread of this process")
    ap.add_argument("--quiet-timeout", type=float, default=900.0,
                    help="before each repeat wait up to this many seconds for other CPU load to stop")
    ap.add_argument("--max-foreign", type=float, default=0.05,
                    help="discard a repeat if other processes used more than this share of all cores")
    ap.add_argument("--max-discards", type=int, default=10, help="per run, then noisy repeats are kept")
    ap.add_argument("--out", type=Path, default=RESULTS / "lm_overhead.json")
    args = ap.parse_args()
    cores = mp.cpu_count()
    results = []
    with fake_server(args.delay_ms / 1000, args.server) as (url, pid):
        for item in args.runs.split(","):
            c, n, *rest = item.split(":")
            results.append(measure(url, pid, int(c), int(n), rest[0] if rest else "text", args, cores))
            print(f"  C={c} N={n} {results[-1].variant}: walls {results[-1].walls_s}", flush=True)
    print(f"\nLM overhead, server delay {args.delay_ms:.0f} ms, server in a {args.server}, "
          f"median of {args.repeats}")
    print(f"{'C':>4} {'calls':>6} {'variant':>8} {'ideal s':>8} {'wall s':>7} {'overhead':>9} "
          f"{'client ms/call':>14} {'server ms/call':>14} {'other cpu s':>11}")
    for r in results:
        server = f"{r.server_cpu_ms_per_call:.2f}" if r.server_cpu_ms_per_call is not None else "-"
        foreign = f"{r.foreign_cpu_s:.2f}" if r.foreign_cpu_s is not None else "-"
        print(f"{r.concurrency:>4} {r.calls:>6} {r.variant:>8} {r.ideal_s:>8.2f} {r.wall_s:>7.3f} "
              f"{r.overhead_pct:>8.1f}% {r.client_cpu_ms_per_call:>14.2f} {server:>14} {foreign:>11}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "lm_overhead", "delay_ms": args.delay_ms, "server": args.server, "repeats": args.repeats,
        "machine": machine(), "results": [asdict(r) for r in results],
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
