"""Shared helpers for tests on the real embedded model and a real llama.cpp server."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from decoevo.testing.server import free_port


def embedded_model_available() -> bool:
    try:
        import llama_cpp  # noqa: F401

        from decoevo.lm.local import default_gguf_path

        default_gguf_path()
    except Exception:
        return False
    return True


requires_model = pytest.mark.skipif(
    not embedded_model_available() and not os.environ.get("CI"),
    reason="embedded model not installed (run scripts/install.sh)",
)


@contextmanager
def llama_cpp_server(startup_timeout_s: float = 120.0) -> Iterator[str]:
    """Start llama-cpp-python's OpenAI-compatible server on 127.0.0.1 with the embedded GGUF."""
    from decoevo.lm.local import available_cores, default_gguf_path

    port = free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(default_gguf_path()),
           "--host", "127.0.0.1", "--port", str(port), "--n_threads", str(available_cores()),
           "--n_ctx", "4096", "--model_alias", "smollm2"]
    # The server logs a lot to stderr while loading; a pipe would fill and block it, so use a file.
    log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in finally
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=log, text=True)
    base = f"http://127.0.0.1:{port}/v1"
    deadline = time.monotonic() + startup_timeout_s
    try:
        while True:
            if proc.poll() is not None:
                log.seek(0)
                raise RuntimeError(f"llama_cpp.server exited: {log.read()[-2000:]}")
            try:
                if httpx.get(f"{base}/models", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not start in time")
            time.sleep(0.25)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()
