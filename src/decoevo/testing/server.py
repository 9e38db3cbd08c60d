"""Run an ASGI app on 127.0.0.1 in a background thread (for tests and benchmarks)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any


async def read_body(receive: Callable[[], Awaitable[dict[str, Any]]]) -> bytes:
    """The whole request body of a plain ASGI app's request (it may come in several messages)."""
    chunks, more = [], True
    while more:
        message = await receive()
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve_app(app: Any, port: int | None = None, *, startup_timeout_s: float = 20.0, http: str = "auto",
              loop: str = "auto", grace_s: int = 1) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 and yield its base URL ("http://127.0.0.1:PORT"). `http` and `loop` are
    uvicorn's choices ("auto" takes httptools and uvloop when they are installed). On exit, requests still
    being handled get `grace_s` to finish and are then cancelled, so the server is stopped when the block
    ends: uvicorn otherwise waits for them without limit (a slow server's 30 s sleep), and the join below
    gave up after 10 s and left the server thread running."""
    import uvicorn

    port = port or free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off",
                            backlog=4096, timeout_keep_alive=30, http=http, loop=loop,
                            timeout_graceful_shutdown=grace_s)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name=f"serve-{port}", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout_s
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"test server on port {port} did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=grace_s + 10)
