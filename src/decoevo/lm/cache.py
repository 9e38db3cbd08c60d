"""Content-addressed request cache on SQLite (WAL), shared across runs and processes.

The key is the sha256 of everything that determines a completion: the backend's model identity,
the messages, the sampling parameters (including the sample index) and the output schema. Only
successful completions are stored; a cached answer costs no tokens.

Processes sharing the cache also share who is paying for what: before paying for a request, a process
takes a lease on its key (`claim`); another process that wants the same answer waits for it to land in
the cache instead of paying again (sweep cells of different methods ask the same first questions). A
lease ends when its holder releases it, dies (same host), or expires.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from .backend_secrets import mask_fields
from .types import BackendRequest, Completion, Message

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


# WITHOUT ROWID: a lease is taken and dropped for every paid call, and a table clustered on its key
# writes one b-tree per change instead of a table and its index.
_LEASES = """
CREATE TABLE IF NOT EXISTS request_leases (
    key TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    expires REAL NOT NULL
) WITHOUT ROWID
"""


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (signal 0 checks without sending anything)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def default_cache_path() -> Path:
    env = os.environ.get("DECOEVO_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "decoevo" / "requests.sqlite"


# Made once: json.dumps with options makes a new encoder on every call (a key is made for every call).
_KEY_TEXT = json.JSONEncoder(sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def request_key(model_identity: str, request: BackendRequest) -> str:
    payload: dict[str, Any] = {
        "model": model_identity,
        "messages": 0,  # a place for the messages, filled below
        "temperature": request.params.temperature,
        "max_tokens": request.params.max_tokens,
        "seed": request.params.seed,
        "sample_index": request.params.sample_index,
        "schema": request.json_schema,
    }
    if request.params.min_p is not None:  # only when set, so keys made before the field existed still hit
        payload["min_p"] = request.params.min_p
    if request.params.whole_content:  # another text of the same reply: another key (older keys unchanged)
        payload["whole_content"] = True
    # Sorted, the text starts `{"max_tokens":N,"messages":0`: with N an int, nothing before the place holds it.
    messages = _messages_text(request.messages) if type(request.params.max_tokens) is int else None
    if messages is None:  # a message pydantic-core refuses, or a max_tokens that is no int
        payload["messages"] = [m.as_dict() for m in request.messages]
        blob = _KEY_TEXT.encode(payload)
    else:
        text = _KEY_TEXT.encode(payload)
        cut = text.index('"messages":0')
        blob = "".join((text[:cut], '"messages":', messages, text[cut + len('"messages":0'):]))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


def _messages_text(messages: tuple[Message, ...]) -> str | None:
    """The messages as `_KEY_TEXT` writes them (each a mapping with its keys sorted: content, role), every
    string by pydantic-core's encoder, ~5x faster on a long prompt: the standard library's JSON of the prompt
    was ~5 % of a run's CPU (every call makes a key, a cached one too). The same characters: a key must never
    change, or every answer cached before it would be paid again (tests/test_request_key_text.py holds it to
    the standard library's text). None where pydantic-core refuses a string (a lone surrogate)."""
    try:
        parts = [f'{{"content":{to_json(m.content).decode()},"role":{to_json(m.role).decode()}}}' for m in messages]
    except PydanticSerializationError:
        return None
    return "[" + ",".join(parts) + "]"


def _while_locked(step: Callable[[], object], limit_s: float = 30.0) -> None:
    """Run `step`, again while SQLite says the database is locked. Switching a new file to WAL (and creating
    its tables) needs the whole file, and SQLite answers "database is locked" at once, without its busy
    handler, when several processes open a new cache together (four sweep cells starting at one moment)."""
    deadline = time.monotonic() + limit_s
    pause = 0.01
    while True:
        try:
            step()
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause)
            pause = min(pause * 2, 0.5)


class RequestCache:
    """Thread-safe; one connection per thread, WAL so readers never block the writer."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.owner = f"{self.host}:{self.pid}:{uuid.uuid4().hex[:8]}"
        def create() -> None:
            with self._conn() as conn:
                conn.execute(_SCHEMA)
                conn.execute(_LEASES)

        _while_locked(create)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30.0, isolation_level=None)
            _while_locked(lambda: conn.execute("PRAGMA journal_mode=WAL"))
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
        # Masked again: an answer cached before a secret was known (or by an older version) carries none out.
        return mask_fields(Completion(text=row[0], prompt_tokens=row[1], completion_tokens=row[2],
                                      finish_reason=row[3]))

    def put(self, key: str, model: str, completion: Completion, *, release: bool = False) -> None:
        """Store an answer; with `release`, end this handle's lease on `key` in the same transaction (one
        commit instead of two on every paid call, and a waiter never sees the lease gone without the answer)."""
        completion = mask_fields(completion)  # the cache outlives the run: no secret is stored in any field
        row = (key, model, completion.text, completion.prompt_tokens, completion.completion_tokens,
               completion.finish_reason, time.time())
        conn = self._conn()
        if not release:
            conn.execute("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?, ?)", row)
            return
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.execute("INSERT OR REPLACE INTO completions VALUES (?, ?, ?, ?, ?, ?, ?)", row)
            conn.execute("DELETE FROM request_leases WHERE key=? AND owner=?", (key, self.owner))
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ---- leases: one payer per request across processes --------------------------------------------
    def claim(self, key: str, ttl_s: float) -> bool:
        """True when this cache handle may pay for `key` now: no live lease of another process holds it
        (a stale one, of a dead process or past its expiry, is taken over)."""
        conn, now = self._conn(), time.time()
        row = (key, self.owner, self.host, self.pid, now + ttl_s)
        if conn.execute("INSERT OR IGNORE INTO request_leases VALUES (?, ?, ?, ?, ?)", row).rowcount == 1:
            return True
        held = conn.execute("SELECT owner, host, pid, expires FROM request_leases WHERE key=?", (key,)).fetchone()
        if held is None:  # released in between
            return conn.execute("INSERT OR IGNORE INTO request_leases VALUES (?, ?, ?, ?, ?)", row).rowcount == 1
        owner, host, pid, expires = held
        if owner == self.owner:
            return True
        if expires < now or (host == self.host and not pid_alive(pid)):
            return conn.execute("UPDATE request_leases SET owner=?, host=?, pid=?, expires=? WHERE key=? AND owner=?",
                                (self.owner, self.host, self.pid, now + ttl_s, key, owner)).rowcount == 1
        return False

    def held_elsewhere(self, key: str) -> bool:
        """Another live process still holds a lease on `key`."""
        held = self._conn().execute("SELECT owner, host, pid, expires FROM request_leases WHERE key=?",
                                    (key,)).fetchone()
        if held is None or held[0] == self.owner:
            return False
        _owner, host, pid, expires = held
        return expires >= time.time() and (host != self.host or pid_alive(pid))

    def release(self, key: str) -> None:
        self._conn().execute("DELETE FROM request_leases WHERE key=? AND owner=?", (key, self.owner))

    def delete(self, keys: list[str]) -> None:
        self._conn().executemany("DELETE FROM completions WHERE key=?", [(k,) for k in keys])

    def __len__(self) -> int:
        return int(self._conn().execute("SELECT COUNT(*) FROM completions").fetchone()[0])

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
