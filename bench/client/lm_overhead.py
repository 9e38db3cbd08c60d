"""Orchestrator overhead of `decoevo.lm.LM` against an OpenAI-compatible server with a fixed delay.

Every chat completion is answered after `--delay-ms`; N distinct requests go through `LM.complete`
with `max_concurrency=C` and a fresh temporary cache (so every call is paid). The ideal wall time is
`ceil(N / C) * delay`; overhead % = wall / ideal - 1. Runs are C:N[:variant[:loop]]; variants:
  text     LM.complete, plain text (default)     schema   LM.complete with a pydantic schema
  nocache  LM.complete with use_cache=false
  journal  LM.complete with each paid request recorded before it is sent (a run's requests.jsonl)
  sdk      LM.complete on the previous openai backend (SDK + httpx2, bench/client/_sdk_backend.py): the baseline
  textaio  LM.complete with the backend posting over aiohttp (its client before round nine; a proxy's now)
  aiohttp  aiohttp alone, no LM
  http1    the shipped backend's HTTP client (decoevo.lm.http1) alone, no LM
  http     the openai SDK's HTTP client (httpx2) alone, no LM
  floor    a minimal raw-socket HTTP/1.1 client: what the fake server and the kernel cost
`loop` is the client's event loop, asyncio (default, what `decoevo` uses) or uvloop. Repeats are
interleaved (repeat 1 of every run, then repeat 2, ...), so that rows compared as a ratio were measured
under the same load.

    .venv/bin/python -m bench.client.lm_overhead                 # server in its own process (default)
    .venv/bin/python -m bench.client.lm_overhead --server thread # server thread in the client's process
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from bench._common import RESULTS, ForeignLoad, machine, process_cpu_s, wait_until_quiet
from bench.client._fake_server import fake_server, server_stack
from decoevo.lm import LM, GenParams, LMConfig, Message, ModelSpec, RequestCache
from decoevo.rundir import RequestLog

DEFAULT_RUNS = ("1:20,16:320,64:1280,64:1280:schema,64:1280:nocache,64:1280:sdk,64:1280:textaio,64:1280:aiohttp,"
                "64:1280:http1,64:1280:http,64:1280:floor")
LM_VARIANTS = ("text", "schema", "nocache", "sdk", "journal", "textaio")


class Answer(BaseModel):
    answer: str
    score: int


Call = Callable[[str], Awaitable[None]]


def _chat(text: str) -> dict[str, Any]:
    return {"model": "fake", "messages": [{"role": "user", "content": text}], "max_tokens": 64}


async def _client(variant: str, url: str, concurrency: int, cache: Path) -> tuple[Call, LM | None, Callable[[], Any]]:
    """The function that makes one request, the LM (if any) and how to close the client afterwards."""
    if variant in LM_VARIANTS:
        spec = ModelSpec(backend="openai", model="fake", base_url=f"{url}/v1", max_concurrency=concurrency)
        backends = {}
        if variant == "sdk":
            from bench.client._sdk_backend import SDKBackend

            backends["default"] = SDKBackend(spec)
        lm = LM(LMConfig(models={"default": spec}, use_cache=variant != "nocache"), backends=backends,
                cache=RequestCache(cache) if variant != "nocache" else None)
        if variant == "journal":
            lm.journal = RequestLog(cache.with_suffix(".run"))
        if variant == "textaio":  # the same backend, its client swapped for aiohttp's (lm/proxied.py, no proxy)
            from decoevo.lm.bounded_body import ACCEPT_ENCODING, MAX_REPLY_BYTES
            from decoevo.lm.proxied import ProxiedClient

            backend = lm.backend("default")
            backend._session = ProxiedClient(  # type: ignore[attr-defined]
                f"{url}/v1/chat/completions", None, {"Accept-Encoding": ACCEPT_ENCODING, **backend._headers},  # type: ignore[attr-defined]
                connect_timeout_s=spec.connect_timeout_s, max_idle=concurrency, limit=MAX_REPLY_BYTES, where=url)
            backend._loop = asyncio.get_running_loop()  # type: ignore[attr-defined]
        kind, params = (Answer if variant == "schema" else None), GenParams(max_tokens=64)

        async def lm_call(text: str) -> None:
            await lm.complete([Message("user", text)], role="bench", schema=kind, params=params)

        return lm_call, lm, lm.aclose
    sem = asyncio.Semaphore(concurrency)
    if variant == "aiohttp":
        import aiohttp

        session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=concurrency),
                                        headers={"Content-Type": "application/json"})

        async def aiohttp_call(text: str) -> None:
            async with sem, session.post(f"{url}/v1/chat/completions", data=json.dumps(_chat(text))) as response:
                json.loads(await response.read())

        return aiohttp_call, None, session.close
    if variant == "http1":
        from decoevo.lm.http1 import Client

        client = Client(url, {"Content-Type": "application/json"}, connect_timeout_s=10.0, max_idle=concurrency,
                        limit=1 << 25, where=url)

        async def http1_call(text: str) -> None:
            async with sem:
                body = json.dumps(_chat(text)).encode()
                json.loads((await client.request("POST", "/v1/chat/completions", body)).body)

        return http1_call, None, client.aclose
    if variant == "http":
        import openai

        limits = type(openai.DEFAULT_CONNECTION_LIMITS)(max_connections=concurrency,
                                                       max_keepalive_connections=concurrency)
        http = openai.DefaultAsyncHttpxClient(limits=limits)

        async def http_call(text: str) -> None:
            async with sem:
                json.loads((await http.post(f"{url}/v1/chat/completions", json=_chat(text))).content)

        return http_call, None, http.aclose
    assert variant == "floor", f"unknown variant {variant}"
    host, port = url.removeprefix("http://").split(":")
    pool: asyncio.Queue[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = asyncio.Queue()
    conns = [await asyncio.open_connection(host, int(port)) for _ in range(concurrency)]
    for conn in conns:
        pool.put_nowait(conn)

    async def floor_call(text: str) -> None:
        reader, writer = await pool.get()
        body = json.dumps(_chat(text)).encode()
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
    load1: float  # the 1-minute load average when the repeat started


async def _one_run(url: str, server_pid: int | None, cache: Path, concurrency: int, calls: int, variant: str,
                   tag: str) -> Repeat:
    call, lm, close = await _client(variant, url, concurrency, cache)
    await asyncio.gather(*(call(f"{tag} warm-up {i}") for i in range(concurrency)))  # open the connections
    server0 = process_cpu_s(server_pid) if server_pid else 0.0
    load1 = os.getloadavg()[0]
    with ForeignLoad([server_pid] if server_pid else []) as load:
        cpu0, t0 = time.process_time(), time.perf_counter()
        await asyncio.gather(*(call(f"{tag} request {i}") for i in range(calls)))
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server = process_cpu_s(server_pid) - server0 if server_pid else None
    if lm is not None:
        total = lm.ledger.total()
        assert total.calls == calls + concurrency and total.cache_hits == 0, "every call must be paid"
    await close()
    return Repeat(wall, cpu, server, load.foreign_s, round(load1, 2))


@dataclass
class RunResult:
    concurrency: int
    calls: int
    variant: str
    loop: str = "asyncio"  # the client's event loop
    wall_s: float = 0.0  # median over kept repeats
    ideal_s: float = 0.0
    overhead_pct: float = 0.0
    client_cpu_ms_per_call: float = 0.0  # median; includes the server's when it runs in a thread of this process
    server_cpu_ms_per_call: float | None = None  # server in its own process only
    foreign_cpu_s: float | None = None  # worst kept repeat: CPU used by other processes on the machine meanwhile
    discarded: int = 0  # repeats thrown away because other processes used the CPU meanwhile
    walls_s: list[float] = field(default_factory=list)
    load1: list[float] = field(default_factory=list)  # 1-minute load average at the start of each kept repeat

    def summarize(self, reps: list[Repeat], delay_ms: float) -> None:
        self.wall_s = round(statistics.median(r.wall_s for r in reps), 4)
        self.ideal_s = round(math.ceil(self.calls / self.concurrency) * delay_ms / 1000, 4)
        self.overhead_pct = round(100 * (self.wall_s / self.ideal_s - 1), 2)
        self.client_cpu_ms_per_call = round(1000 / self.calls * statistics.median(r.client_cpu_s for r in reps), 3)
        servers = [r.server_cpu_s for r in reps if r.server_cpu_s is not None]
        self.server_cpu_ms_per_call = round(1000 / self.calls * statistics.median(servers), 3) if servers else None
        foreign = [r.foreign_cpu_s for r in reps if r.foreign_cpu_s is not None]
        self.foreign_cpu_s = max(foreign) if foreign else None
        self.walls_s = [round(r.wall_s, 4) for r in reps]
        self.load1 = [r.load1 for r in reps]


def run_in_loop(loop: str, coro: Any) -> Repeat:
    if loop == "uvloop":
        import uvloop

        result: Repeat = uvloop.run(coro)
        return result
    return asyncio.run(coro)


def measure_all(url: str, server_pid: int | None, runs: list[RunResult], args: argparse.Namespace,
                cores: int) -> None:
    """Every run `args.repeats` times, interleaved; a repeat during which other processes used more than
    `--max-foreign` of the machine is discarded and taken again (at most `--max-discards` per run)."""
    kept: list[list[Repeat]] = [[] for _ in runs]
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeats):
            for run, reps in zip(runs, kept, strict=True):
                while len(reps) <= round_:
                    wait_until_quiet(timeout_s=args.quiet_timeout)
                    tag = f"c{run.concurrency}-n{run.calls}-{run.variant}-{run.loop}-{len(reps) + run.discarded}"
                    rep = run_in_loop(run.loop, _one_run(url, server_pid, Path(tmp) / f"{tag}.sqlite",
                                                         run.concurrency, run.calls, run.variant, tag))
                    noisy = rep.foreign_cpu_s is not None and rep.foreign_cpu_s > args.max_foreign * rep.wall_s * cores
                    if noisy and run.discarded < args.max_discards:
                        run.discarded += 1
                        print(f"  C={run.concurrency} {run.variant}: discarded a repeat, other processes used "
                              f"{rep.foreign_cpu_s:.2f} CPU s", flush=True)
                        continue
                    reps.append(rep)
                    print(f"  C={run.concurrency} N={run.calls} {run.variant} ({run.loop}): {rep.wall_s:.3f} s, "
                          f"{1000 * rep.client_cpu_s / run.calls:.2f} ms CPU/call, load {rep.load1}", flush=True)
    for run, reps in zip(runs, kept, strict=True):
        run.summarize(reps, args.delay_ms)


def comparisons(results: list[RunResult]) -> list[dict[str, Any]]:
    """Each LM variant against the `sdk` baseline at the same C and N, from the same interleaved run."""
    out = []
    for base in (r for r in results if r.variant == "sdk"):
        for r in results:
            if (r.concurrency, r.calls) == (base.concurrency, base.calls) and r.variant in ("text", "schema"):
                out.append({"concurrency": r.concurrency, "variant": r.variant, "loop": r.loop, "baseline": "sdk",
                            "wall_ratio": round(r.wall_s / base.wall_s, 3),
                            "client_cpu_ratio": round(r.client_cpu_ms_per_call / base.client_cpu_ms_per_call, 3),
                            "overhead_pct": r.overhead_pct, "baseline_overhead_pct": base.overhead_pct})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--delay-ms", type=float, default=200.0, help="server delay per completion")
    ap.add_argument("--runs", default=DEFAULT_RUNS, help="comma-separated C:N[:variant[:loop]] (default %(default)s)")
    ap.add_argument("--repeats", type=int, default=5, help="repeats per run; the median wall time is reported")
    ap.add_argument("--server", choices=["process", "thread"], default="process",
                    help="run the fake server in a child process or in a thread of this process")
    ap.add_argument("--server-impl", choices=["fast", "starlette"], default="fast",
                    help="fast: plain ASGI on uvicorn+httptools+uvloop; starlette: FakeOpenAI on uvicorn+h11 "
                         "(bench/client/_fake_server.py)")
    ap.add_argument("--quiet-timeout", type=float, default=900.0,
                    help="before each repeat wait up to this many seconds for other CPU load to stop")
    ap.add_argument("--max-foreign", type=float, default=0.05,
                    help="discard a repeat if other processes used more than this share of all cores")
    ap.add_argument("--max-discards", type=int, default=10, help="per run, then noisy repeats are kept")
    ap.add_argument("--out", type=Path, default=RESULTS / "lm_overhead.json")
    args = ap.parse_args()
    cores = mp.cpu_count()
    runs = []
    for item in args.runs.split(","):
        c, n, *rest = item.split(":")
        variant, loop = (rest + ["text", "asyncio"][len(rest):])[:2]  # the defaults fill what is missing
        if loop not in ("asyncio", "uvloop"):
            ap.error(f"loop must be asyncio or uvloop, not {loop!r} in {item!r}")
        runs.append(RunResult(int(c), int(n), variant, loop))
    with fake_server(args.delay_ms / 1000, args.server, args.server_impl) as (url, pid):
        measure_all(url, pid, runs, args, cores)
    print(f"\nLM overhead, server delay {args.delay_ms:.0f} ms, server in a {args.server} "
          f"({server_stack(args.server_impl)}), median of {args.repeats}")
    print(f"{'C':>4} {'calls':>6} {'variant':>8} {'loop':>8} {'ideal s':>8} {'wall s':>7} {'overhead':>9} "
          f"{'client ms/call':>14} {'server ms/call':>14} {'other cpu s':>11} {'load1':>11}")
    for r in runs:
        server = f"{r.server_cpu_ms_per_call:.2f}" if r.server_cpu_ms_per_call is not None else "-"
        foreign = f"{r.foreign_cpu_s:.2f}" if r.foreign_cpu_s is not None else "-"
        print(f"{r.concurrency:>4} {r.calls:>6} {r.variant:>8} {r.loop:>8} {r.ideal_s:>8.2f} {r.wall_s:>7.3f} "
              f"{r.overhead_pct:>8.1f}% {r.client_cpu_ms_per_call:>14.2f} {server:>14} {foreign:>11} "
              f"{min(r.load1):>5.2f}-{max(r.load1):<5.2f}")
    compared = comparisons(runs)
    for c in compared:
        print(f"C={c['concurrency']} {c['variant']} ({c['loop']}) vs sdk: wall x{c['wall_ratio']}, "
              f"client CPU x{c['client_cpu_ratio']} (overhead {c['overhead_pct']}% vs {c['baseline_overhead_pct']}%)")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({
        "benchmark": "lm_overhead", "delay_ms": args.delay_ms, "server": args.server,
        "server_stack": server_stack(args.server_impl), "repeats": args.repeats,
        "machine": machine(), "results": [asdict(r) for r in runs], "comparisons": compared,
    }, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
