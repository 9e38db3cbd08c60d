"""bench/client/run_cpu.py --sample: how py-spy's samples are put in layers (the docs' CPU-by-layer table
reads these numbers, so the rules are checked here)."""

from __future__ import annotations

from pathlib import Path

from bench.client.run_cpu import STARTUP, sampled_layers, sampled_summary

SRC = "/w/src/decoevo"
LIB = "/usr/lib/python3.11"


def frame(func: str, path: str, line: int = 1) -> str:
    return f"{func} ({path}:{line})"


def write(tmp_path: Path, *stacks: tuple[list[str], int]) -> Path:
    raw = tmp_path / "raw.txt"
    raw.write_text("".join(f"thread (7): MainThread;{';'.join(frames)} {n}\n" for frames, n in stacks))
    return raw


def test_each_sample_goes_to_the_innermost_frame_with_a_layer(tmp_path: Path) -> None:
    put = frame("RequestCache.put", f"{SRC}/lm/cache.py")
    raw = write(tmp_path,
                ([frame("run", f"{SRC}/engine/run.py"), put], 5),  # SQLite's C time shows as the caller's line
                ([frame("request_key", f"{SRC}/lm/cache.py"), frame("encode", f"{LIB}/json/encoder.py")], 3),
                ([frame("run", f"{SRC}/engine/run.py"), frame("replace", f"{LIB}/dataclasses.py")], 2))
    assert sampled_layers(raw) == {"request cache": 5, "JSON encode/parse/validate": 3, "engine and methods": 2}


def test_imports_are_start_up_and_waiting_threads_and_polls_are_idle(tmp_path: Path) -> None:
    imported = [frame("<module>", f"{SRC}/cli/run.py"), frame("_find_and_load", "<frozen importlib._bootstrap>"),
                frame("<module>", f"{LIB}/json/encoder.py")]
    waiting = [frame("_RefreshThread.run", "/site/rich/live.py"), frame("Event.wait", f"{LIB}/threading.py")]
    drawing = [frame("_RefreshThread.run", "/site/rich/live.py"), frame("Console.print", "/site/rich/console.py")]
    polling = [frame("BaseEventLoop._run_once", f"{LIB}/asyncio/base_events.py"),
               frame("EpollSelector.select", f"{LIB}/selectors.py", 468)]
    handling = [frame("BaseEventLoop._run_once", f"{LIB}/asyncio/base_events.py"),
                frame("EpollSelector.register", f"{LIB}/selectors.py")]
    raw = write(tmp_path, (imported, 4), (waiting, 90), (drawing, 1), (polling, 70), (handling, 2))
    assert sampled_layers(raw) == {STARTUP: 4, "progress line": 1, "event loop": 2}


def test_the_summary_shares_the_cpu_of_the_samples_after_start_up() -> None:
    out = sampled_summary({STARTUP: 50, "HTTP client": 30, "event loop": 10}, cpu_ms_per_paid_call=2.0)
    assert out["share"] == {"HTTP client": 0.75, "event loop": 0.25}
    assert out["ms_per_paid_call"] == {"HTTP client": 1.5, "event loop": 0.5}


def test_the_pydantic_core_json_helpers_are_the_json_layer(tmp_path: Path) -> None:
    """pydantic-core's encoder is C: its time shows as the helper that calls it, which is JSON work alone."""
    raw = write(tmp_path,
                ([frame("RunWriter.record_call", f"{SRC}/rundir/writer.py"),
                  frame("dumps_json_line", f"{SRC}/rundir/files.py", 216)], 4),
                ([frame("OpenAIBackend._decoded", f"{SRC}/lm/openai_backend.py"),
                  frame("parse_json", f"{SRC}/lm/openai_backend.py")], 3),
                ([frame("request_key", f"{SRC}/lm/cache.py"), frame("_messages_text", f"{SRC}/lm/cache.py")], 2),
                ([frame("AppendFiles.line", f"{SRC}/rundir/files.py")], 1))
    assert sampled_layers(raw) == {"JSON encode/parse/validate": 9, "run directory": 1}
