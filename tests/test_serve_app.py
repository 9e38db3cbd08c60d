"""`serve_app` stops its server when the block ends, also while a request is still being handled (a slow test
server's sleep): before, uvicorn waited for the handler, the join gave up after 10 s and the server thread
kept running behind the test (about 10 s of the default suite's time in each test with a slow server)."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

import pytest

from decoevo.testing.server import serve_app

pytest.importorskip("uvicorn")


def test_a_request_still_being_handled_does_not_keep_the_server_running_after_the_block() -> None:
    started, finished = threading.Event(), threading.Event()

    async def slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
        started.set()
        await asyncio.sleep(60)  # as a slow test server answers
        finished.set()

    before = set(threading.enumerate())
    with serve_app(slow) as url:
        (thread,) = set(threading.enumerate()) - before
        address = urlsplit(url)
        with socket.create_connection((address.hostname, address.port)) as client:
            client.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert started.wait(20)
        # the client is gone (as a killed process's is); the handler still sleeps
    assert not thread.is_alive()
    assert not finished.is_set()  # it was cancelled, not waited for
