"""Content-addressed request cache on SQLite (WAL), shared across runs and processes.

The key is the sha256 of everything that determines a completion: the backend's model identity,
the messages, the sampling parameters (including the sample index) and the output schema. Only
successful completions are stored; a cached answer costs no tokens.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from .types import BackendRequest, Completion

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT PRIMARY KEY,
    model TEXT NOT NULL,
    text TEXT NOT NULL,
    prompt_tokens INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    finish_reason TEXT NOT NULL,
    created REAL NOT NULL
)
"""


def default_cache_path() -> Path:
    env = os.environ.get("DECOEVO_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "decoevo" / "requests.sqlite"


def request_key(model_identity: str, request: BackendRequest) -> str:
    payload: dict[str, Any] = {
        "model": model_identity,
        "messages": [m.as_dict() for m in request.messages],
        "temperature": request.params.temperature,
        "max_tokens": request.params.max_tokens,
        "seed": request.params.seed,
        "sample_index": request.params.sample_index,
        "schema": request.json_schema,
    }
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


_INSERT = "INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?, ?)"
Row = tuple[str, str, str, int, int, str, float]
#: a row waiting for the writer thread, with the event loop and future of the caller waiting for it
_Waiting = tuple[Row, asyncio.AbstractEventLoop, "asyncio.Future[None]"]


def _row(key: str, model: str, completion: Completion) -> Row:
    return (key, model, completion.text, completion.prompt_tokens, completion.completion_tokens,
            completion.finish_reason, time.time())


def _settle(futures: list[asyncio.Future[None]], error: BaseException | None) -> None:
    for future in futures:
        if not future.done():  # the caller may have been cancelled meanwhile
            if error is None:
                future.set_result(None)
            else:
                future.set_exception(error)


class RequestCache:
    """Thread-safe; one connection per thread, WAL so readers never block the writer.

    `aput` (what `LM` uses) hands the row to a writer thread and returns once it is committed. Rows
    that arrive while a commit is running are committed together in the next transaction. The event
    loop never waits for SQLite's commit or a WAL checkpoint; at 64 requests in flight these took
    0.1 ms per call on average and up to 17 ms for a checkpoint (bench/lm_overhead.py)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._conn() as conn:
            conn.execute(_SCHEMA)
        self._waiting: list[_Waiting] = []
        self._waiting_lock = threading.Lock()
        self._writer: ThreadPoolExecutor | None = None
        self.commits = 0  # transactions the writer thread committed (rows are grouped into fewer)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute("PRAGMA busy_timeout=30000")
            self._local.conn = conn
        return conn

    def get(self, key: str) -> Completion | None:
        row = self._conn().execute(
            "SELECT text, prompt_tokens, completion_tokens, finish_reason FROM completions WHERE key=?",
            (key,),
        ).fetchone()
        if row is None:
            return None
        return Completion(text=row[0], prompt_tokens=row[1], completion_tokens=row[2], finish_reason=row[3])

    def put(self, key: str, model: str, completion: Completion) -> None:
        """Store and commit on the calling thread."""
        self._conn().execute(_INSERT, _row(key, model, completion))

    async def aput(self, key: str, model: str, completion: Completion) -> None:
        """Store and commit on the writer thread; returns when the row is committed (or raises why not)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        with self._waiting_lock:
            self._waiting.append((_row(key, model, completion), loop, done))
            first = len(self._waiting) == 1  # else a commit is already queued and will take this row too
            if self._writer is None:
                self._writer = ThreadPoolExecutor(1, thread_name_prefix="decoevo-cache")
            if first:
                self._writer.submit(self._commit_waiting)
        await done

    def _commit_waiting(self) -> None:
        """Runs on the writer thread: one transaction for every row waiting, then wake their callers."""
        with self._waiting_lock:
            batch, self._waiting = self._waiting, []
        if not batch:
            return
        error: BaseException | None = None
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(_INSERT, [row for row, _, _ in batch])
                conn.execute("COMMIT")
                self.commits += 1
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        except Exception as exc:  # handed to every caller of this batch
            error = exc
        by_loop: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for _, loop, future in batch:
            by_loop.setdefault(loop, []).append(future)
        for loop, futures in by_loop.items():
            with contextlib.suppress(RuntimeError):  # that loop has closed: nobody is waiting any more
                loop.call_soon_threadsafe(_settle, futures, error)

    def delete(self, keys: list[str]) -> None:
        self._conn().executemany("DELETE FROM completions WHERE key=?", [(k,) for k in keys])

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def close(self) -> None:
        """Wait for queued commits, then close the connections; the cache reopens on its next use."""
        if self._writer is not None:
            self._writer.submit(self._close_thread_conn)
            self._writer.shutdown(wait=True)
            self._writer = None
        self._close_thread_conn()

    def _close_thread_conn(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
