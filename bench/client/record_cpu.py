"""CPU to record one paid call in the run directory (issue 47.1, round eight): the request journal's line, the
call log's line and the transcript entry (a ~5 KiB prompt, a registered secret to mask), as `RunWriter` and
`RequestLog` write them in a run, measured in this process with `time.process_time` over N calls.

    .venv/bin/python -m bench.client.record_cpu                  # the tree decoevo is imported from
    git archive REV src | tar -x -C /tmp/old && PYTHONPATH=/tmp/old/src .venv/bin/python -m bench.client.record_cpu

Alternate the two a few times on a shared machine: one figure is ± 20 % here."""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import decoevo
from decoevo.redact import register_secret
from decoevo.rundir.records import CallLine
from decoevo.rundir.requests import RequestLog
from decoevo.rundir.transcripts import TranscriptEntry
from decoevo.rundir.writer import RunWriter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=3000)
    args = parser.parse_args()
    register_secret("sk-" + "abcdefghijklmnopqrstuvwxyz0123456789")
    kept_open = hasattr(RunWriter, "close")  # round eight: entries as mappings, logs kept open
    messages = [{"role": "system", "content": "You are a careful solver. " * 100},
                {"role": "user", "content": "My knee hurts after running. " * 80}]
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        writer, journal = RunWriter(run), RequestLog(run)

        def one(n: int) -> None:
            request = journal.sent(f"k{n}", "solve", "m", 1200, 512)
            writer.record_call(CallLine(role="solve", model="m", key=f"k{n}" * 8, cached=False, prompt_tokens=1200,
                                        completion_tokens=300, phase="step 3", request=request))
            entry: dict[str, Any] = {
                "key": f"k{n}", "role": "solve", "model": "m", "phase": "step 3", "messages": messages,
                "params": {"temperature": 0.7, "max_tokens": 512, "sample_index": n % 4}, "structured": False,
                "reply": "Rest, ice, and see a physician if it persists. " * 20}
            writer.record_transcript(entry if kept_open else TranscriptEntry(**entry))  # type: ignore[arg-type]

        for n in range(200):  # warm
            one(n)
        start = time.process_time()
        for n in range(args.calls):
            one(n)
        per_call = (time.process_time() - start) / args.calls
        if kept_open:
            writer.close()
        journal.close()
    print(f"{decoevo.__file__}: {per_call * 1e6:.1f} µs of CPU to record a paid call ({args.calls} calls)")


if __name__ == "__main__":
    main()
