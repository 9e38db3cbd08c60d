"""CPU of each thread of a whole `decoevo run`, sampled from /proc while it runs (issue 47.1): which thread a
latency-dependent cost lives in. The same run as `bench/client/run_cpu.py` (DecoEvo at `paper`, the toy
questions, concurrency 256, a fresh cache, on a 120-column pseudo-terminal, the simulated server answering after
a fixed latency); every 0.3 s the run's threads' user + system CPU is read from /proc/PID/task/TID/stat, and the
last reading of each thread before the process exits is reported (so the final ~0.3 s and the exit are not in it).

    .venv/bin/python -m bench.client.thread_cpu [--latencies-ms 20,200,20,200] [--seed 0]
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import pty
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from pathlib import Path

from bench._common import RESULTS, machine
from bench.client.run_cpu import API_KEY, ROOT, _drain, paid_calls, run_argv, tree_env
from bench.scale.paper_scale import sim_server_process

TICK = os.sysconf("SC_CLK_TCK")


def threads_cpu(pid: int) -> dict[str, float]:
    """CPU seconds of each live thread of `pid`, by thread id (threads that end between reads are skipped)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        out[tid] = (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return out


def one_run(url: str, data: Path, work: Path, seed: int) -> dict[str, object]:
    env = tree_env(ROOT / "src")
    env.update(OPENAI_API_KEY=API_KEY, DECOEVO_CACHE=str(work / "cache.sqlite"), TERM="xterm-256color")
    env.pop("COLUMNS", None)
    env.pop("NO_COLOR", None)
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    threading.Thread(target=_drain, args=(master, []), daemon=True).start()
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "decoevo", *run_argv(url, data, work / "runs", seed, 256)],
                            env=env, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, cwd=ROOT,
                            start_new_session=True)
    os.close(slave)
    last: dict[str, float] = {}
    while proc.poll() is None:
        try:
            last.update(threads_cpu(proc.pid))
        except FileNotFoundError:
            break
        time.sleep(0.3)
    wall = time.perf_counter() - t0
    os.close(master)
    if proc.returncode != 0:
        raise SystemExit(f"decoevo run exited {proc.returncode}")
    main_tid = str(proc.pid)
    paid, _ = paid_calls(work / "runs" / "run")
    return {"wall_s": round(wall, 2), "paid_calls": paid, "main_thread_cpu_s": last.get(main_tid, 0.0),
            "other_threads_cpu_s": round(sum(v for k, v in last.items() if k != main_tid), 3),
            "threads": len(last)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latencies-ms", default="20,200,20,200", help="run in this order (repeats allowed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=RESULTS / "thread_cpu.json")
    args = parser.parse_args(argv)
    from decoevo.testing.toy_server import write_toy_questions

    doc: dict[str, object] = {"machine": machine(), "seed": args.seed, "latencies": {}}
    with tempfile.TemporaryDirectory(prefix="thread-cpu-") as tmp_name:
        tmp = Path(tmp_name)
        data = write_toy_questions(tmp / "questions.jsonl", 300)
        for i, ms in enumerate(float(x) for x in args.latencies_ms.split(",")):
            server = {"sim_seed": 0, "slots": 1024, "latency": {"base_s": ms / 1000, "per_token_s": 0.0, "tail_p": 0.0}}
            with sim_server_process(server) as url:
                work = tmp / f"run-{i}"
                work.mkdir()
                row = one_run(url, data, work, args.seed)
            row["load_average_1min"] = round(os.getloadavg()[0], 2)
            doc["latencies"].setdefault(f"{ms:g}ms", []).append(row)  # type: ignore[attr-defined]
            print(f"{ms:6g} ms: {json.dumps(row)}", flush=True)
    args.out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
