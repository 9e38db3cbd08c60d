"""A lean asyncio HTTP/1.1 client for the one thing the openai backend does: send a request to one origin over
keep-alive connections and read the reply, decoded, to a ceiling.

Why our own code and not aiohttp here: aiohttp's own per-request Python work measured ~0.27 ms of CPU a call
against ~0.08 ms for a raw-socket client (docs/performance.md), at 64 requests in flight on one event loop that
CPU is queueing, and importing it cost a served run ~0.15 s before its first call. This client is an
`asyncio.Protocol` (no streams: no reader task, one wake-up per reply), parses the reply as its bytes arrive,
and bounds everything a server controls: the header block (`MAX_HEAD`), the header count (`MAX_HEADERS`), a
chunk-size line, and the decoded body (`bounded_body.BoundedBody`, zlib's `max_length`). It never follows a
redirect (a 3xx is a status like any other) and never speaks to a proxy: requests through a proxy go through
aiohttp (`lm/proxied.py`).

Failures are three exceptions the backend turns into its categories: `ConnectError` (no connection; a reason in
words), `ConnectTimeout`, and `TransportError` (the request may have been sent: a reset, a close mid-reply, bad
framing). None of them quotes a header we sent."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import ssl
import urllib.parse
from collections.abc import Callable, Iterator, Mapping

from .bounded_body import BoundedBody

#: the most bytes of a reply's status line and headers together (and of a chunked body's trailers)
MAX_HEAD = 64 << 10
#: the most header lines in one reply
MAX_HEADERS = 128
#: the longest chunk-size line (hex size plus extensions)
MAX_CHUNK_LINE = 4096

_IDLE, _HEAD, _LENGTH, _CHUNK_SIZE, _CHUNK_DATA, _CHUNK_END, _TRAILERS, _UNTIL_CLOSE = range(8)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class HTTPFailure(Exception):
    """Base of this client's failures."""


class ConnectError(HTTPFailure):
    """No connection was made; the text says why in words (refused, a name that does not resolve, TLS)."""


class ConnectTimeout(HTTPFailure):
    """No connection within the connect limit."""


class TransportError(HTTPFailure):
    """The exchange failed once the request may have been sent: the server may have seen (and billed) it."""


class Headers(Mapping[str, str]):
    """A reply's headers, looked up by any case of their name (stored lower-cased; repeated ones joined)."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, str]) -> None:
        self._fields = fields

    def __getitem__(self, name: str) -> str:
        return self._fields[name.lower()]

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)


class Response:
    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, headers: Headers, body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body


_tls: ssl.SSLContext | None = None


def tls_context() -> ssl.SSLContext:
    """The process's verifying TLS context, made on first use (loading the CA store costs milliseconds)."""
    global _tls
    if _tls is None:
        _tls = ssl.create_default_context()
    return _tls


class _Connection(asyncio.Protocol):
    """One keep-alive connection; it carries one exchange at a time and parses the reply as bytes arrive."""

    def __init__(self, where: str, limit: int, on_lost: Callable[[_Connection], None]) -> None:
        self.where, self.limit, self._on_lost = where, limit, on_lost
        self.transport: asyncio.Transport | None = None
        self.broken = False  # eof, reset, stray bytes or a reply that forbids reuse: never reused
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._buf = bytearray()
        self._phase = _IDLE
        self._waiter: asyncio.Future[Response] | None = None
        self._heard: Callable[[], None] | None = None
        self._status = 0
        self._headers = Headers({})
        self._body: BoundedBody | None = None
        self._left = 0  # bytes still due in the current Content-Length body or chunk
        self._trailer_bytes = 0
        self._keep_alive = True

    # ---- asyncio.Protocol -------------------------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None:  # bytes nobody asked for: the connection's framing is no longer known
            self.close()
            return
        self._buf += data
        if self._heard is not None and b"\n" in self._buf:  # the status line is here: the reply has started
            heard, self._heard = self._heard, None
            heard()
        try:
            self._advance()
        except Exception as exc:  # a framing error, or the body's own (oversized, an encoding refused)
            self._fail(exc)

    def eof_received(self) -> bool:
        self.broken = True
        self._ended("the server closed the connection", clean=True)
        return False  # the transport closes itself

    def connection_lost(self, exc: Exception | None) -> None:
        self.broken = True
        self._ended("the connection was reset" if exc is not None else "the server closed the connection",
                    clean=exc is None)
        if not self.lost.done():
            self.lost.set_result(None)
        self._on_lost(self)

    # ---- the exchange ------------------------------------------------------------------------------------
    def usable(self) -> bool:
        """Whether a new request may go on this idle connection: a server that closed it while idle has sent
        its FIN (seen here as eof, or the transport closing), and the request then goes on a fresh one."""
        return not self.broken and self.transport is not None and not self.transport.is_closing()

    def send(self, data: bytes, heard: Callable[[], None] | None) -> asyncio.Future[Response]:
        assert self.transport is not None and self._waiter is None
        self._waiter = waiter = asyncio.get_running_loop().create_future()
        self._heard, self._phase = heard, _HEAD
        self.transport.write(data)
        return waiter

    def close(self) -> None:
        self.broken = True
        if self.transport is not None:
            self.transport.close()

    def _ended(self, why: str, *, clean: bool) -> None:
        if self._waiter is None or self._waiter.done():
            return
        if self._phase == _UNTIL_CLOSE and clean:  # a body without a length ends where the connection does
            try:
                self._complete()
            except Exception as exc:
                self._fail(exc)
            return
        self._fail(TransportError(f"{why} before the reply was complete" if self._phase != _HEAD or self._buf
                                  else f"{why} before any reply"))

    def _fail(self, exc: Exception) -> None:
        self.close()
        waiter, self._waiter = self._waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)

    def _complete(self) -> None:
        assert self._body is not None and self._waiter is not None
        body = self._body.finish()
        waiter, self._waiter, self._body, self._phase = self._waiter, None, None, _IDLE
        if not self._keep_alive or self._buf:  # extra bytes after the reply: nothing more is known of them
            self.close()
        if not waiter.done():
            waiter.set_result(Response(self._status, self._headers, body))

    # ---- the parser ----------------------------------------------------------------------------------------
    def _advance(self) -> None:
        buf = self._buf
        while self._waiter is not None:
            phase = self._phase
            if phase == _HEAD:
                end = buf.find(b"\r\n\r\n")
                if end < 0 or end > MAX_HEAD:
                    if len(buf) > MAX_HEAD:
                        raise TransportError(f"the reply's header block ran past {MAX_HEAD >> 10} KiB")
                    return
                head = bytes(buf[:end])
                del buf[:end + 4]
                self._start(head)
            elif phase in (_LENGTH, _CHUNK_DATA):
                if not buf:
                    return
                take = min(self._left, len(buf))
                assert self._body is not None
                self._body.feed(bytes(buf[:take]) if take < len(buf) else bytes(buf))
                del buf[:take]
                self._left -= take
                if self._left == 0:
                    if phase == _LENGTH:
                        self._complete()
                    else:
                        self._phase = _CHUNK_END
            elif phase == _CHUNK_SIZE:
                end = buf.find(b"\r\n")
                if end < 0 or end > MAX_CHUNK_LINE:
                    if len(buf) > MAX_CHUNK_LINE:
                        raise TransportError("a chunk-size line of the reply is too long")
                    return
                size = bytes(buf[:end]).split(b";", 1)[0].strip()  # chunk extensions are ignored
                del buf[:end + 2]
                if not size or size.strip(b"0123456789abcdefABCDEF"):
                    raise TransportError(f"bad chunk size {size[:40]!r} in the reply")
                self._left = int(size, 16)
                self._phase = _CHUNK_DATA if self._left else _TRAILERS
            elif phase == _CHUNK_END:
                if len(buf) < 2:
                    return
                if buf[:2] != b"\r\n":
                    raise TransportError("a chunk of the reply does not end where its size says")
                del buf[:2]
                self._phase = _CHUNK_SIZE
            elif phase == _TRAILERS:
                end = buf.find(b"\r\n")
                if self._trailer_bytes + (len(buf) if end < 0 else end + 2) > MAX_HEAD:
                    raise TransportError(f"the reply's trailers ran past {MAX_HEAD >> 10} KiB")
                if end < 0:
                    return
                self._trailer_bytes += end + 2
                del buf[:end + 2]
                if end == 0:  # the empty line after the trailers (which are not read)
                    self._complete()
            else:  # _UNTIL_CLOSE: everything until the server closes
                if buf:
                    assert self._body is not None
                    self._body.feed(bytes(buf))
                    buf.clear()
                return

    def _start(self, head: bytes) -> None:
        """The status line and headers: what the body's framing and the connection's reuse depend on."""
        lines = head.split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        code = rest[:3]
        if version[:7] != b"HTTP/1." or len(version) != 8 or len(code) != 3 or not code.isdigit() \
                or rest[3:4] not in (b"", b" "):
            raise TransportError(f"the reply's status line is not HTTP/1.x: {lines[0][:60]!r}")
        if len(lines) - 1 > MAX_HEADERS:
            raise TransportError(f"the reply has more than {MAX_HEADERS} header lines")
        fields: dict[str, str] = {}
        for line in lines[1:]:
            name, colon, value = line.partition(b":")
            if not colon or not name or name != name.strip() or line[:1] in (b" ", b"\t"):
                raise TransportError(f"a header line of the reply is malformed: {line[:60]!r}")
            key, text = name.decode("latin-1").lower(), value.strip().decode("latin-1")
            fields[key] = f"{fields[key]}, {text}" if key in fields else text
        status = int(code)
        if 100 <= status < 200 and status != 101:  # an interim reply (100 Continue): the real one follows
            return
        self._status, self._headers = status, Headers(fields)
        connection = fields.get("connection", "").lower()
        self._keep_alive = version == b"HTTP/1.1" and "close" not in connection
        self._body = BoundedBody(fields.get("content-encoding", ""), self.limit, self.where)
        encoding, length = fields.get("transfer-encoding"), fields.get("content-length")
        if status == 101:
            raise TransportError("the server switched protocols, which was not asked for")
        if status in (204, 304):
            self._complete()
        elif encoding is not None:
            if encoding.strip().lower() != "chunked":
                raise TransportError(f"the reply's transfer-encoding {encoding[:40]!r} is not supported")
            self._keep_alive = self._keep_alive and length is None  # both framings given: never reused
            self._phase = _CHUNK_SIZE
        elif length is not None:
            values = {v.strip() for v in length.split(",")}
            if len(values) != 1 or not (digits := values.pop()).isdigit():
                raise TransportError(f"the reply's Content-Length {length[:40]!r} is not a number")
            self._left = int(digits)
            self._phase = _LENGTH
            if self._left == 0:
                self._complete()
        else:
            self._keep_alive = False
            self._phase = _UNTIL_CLOSE


def _connect_reason(exc: OSError, host: str, port: int) -> str:
    where = f"{host}:{port}"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"the TLS certificate of {where} was refused ({exc.verify_message or exc.reason})"
    if isinstance(exc, ssl.SSLError):
        return f"the TLS handshake with {where} failed ({exc.reason or exc})"
    if isinstance(exc, socket.gaierror):
        return f"the host name {host} does not resolve ({exc.strerror or exc})"
    refused = exc.errno == errno.ECONNREFUSED or (exc.errno is None and f"[Errno {errno.ECONNREFUSED}]" in str(exc))
    reason = os.strerror(exc.errno) if isinstance(exc.errno, int) and exc.errno > 0 else str(exc)
    return f"{where}: {reason.lower()}" + (" (is the server running?)" if refused else "")


class Client:
    """Keep-alive connections to one origin (`http://` or `https://`), at most `max_idle` of them kept between
    requests, all of one event loop. `request` sends and reads one exchange; `aclose` closes every connection."""

    def __init__(self, origin: str, headers: Mapping[str, str], *, connect_timeout_s: float, max_idle: int,
                 limit: int, where: str, tls: ssl.SSLContext | None = None) -> None:
        parts = urllib.parse.urlsplit(origin)
        if parts.scheme not in _DEFAULT_PORTS or not parts.hostname:
            raise ValueError(f"not an http(s) URL: {where}")
        self.host, self.port = parts.hostname, parts.port or _DEFAULT_PORTS[parts.scheme]
        self._https, self._tls = parts.scheme == "https", tls
        host = f"[{self.host}]" if ":" in self.host else self.host
        authority = host if parts.port is None else f"{host}:{self.port}"
        lines = [f"Host: {authority}", *(f"{k}: {v}" for k, v in headers.items())]
        if any("\r" in line or "\n" in line for line in lines):  # a header must never start another
            raise ValueError("a request header holds a line break")
        self._headers = ("\r\n".join(lines) + "\r\nContent-Length: ").encode()
        self._prefixes: dict[tuple[str, str], bytes] = {}
        self.connect_timeout_s, self.max_idle, self.limit, self.where = connect_timeout_s, max_idle, limit, where
        self._idle: list[_Connection] = []
        self._open: set[_Connection] = set()
        self.closed = False

    def _prefix(self, method: str, target: str) -> bytes:
        found = self._prefixes.get((method, target))
        if found is None:
            if any(c in target for c in " \r\n") or any(c in method for c in " \r\n"):
                raise ValueError("a request target holds a space or a line break")
            found = self._prefixes[(method, target)] = f"{method} {target} HTTP/1.1\r\n".encode() + self._headers
        return found

    async def request(self, method: str, target: str, body: bytes = b"",
                      heard: Callable[[], None] | None = None) -> Response:
        """One exchange; `heard` is called when the reply's status line arrives."""
        if self.closed:
            raise TransportError("the client was closed")
        data = self._prefix(method, target) + str(len(body)).encode() + b"\r\n\r\n" + body
        conn = self._reuse() or await self._connect()
        try:
            response = await conn.send(data, heard)
        except BaseException:  # a failure or a cancellation (a timeout): the reply may still come; never reuse
            conn.close()
            raise
        if conn.usable() and len(self._idle) < self.max_idle and not self.closed:
            self._idle.append(conn)
        else:
            conn.close()
        return response

    def _reuse(self) -> _Connection | None:
        while self._idle:
            conn = self._idle.pop()  # the most recently used: the least likely to have been closed by the server
            if conn.usable():
                return conn
            conn.close()
        return None

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        tls = (self._tls or tls_context()) if self._https else None
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await loop.create_connection(
                    lambda: _Connection(self.where, self.limit, self._open.discard), self.host, self.port,
                    ssl=tls, server_hostname=self.host if tls is not None else None)
        except TimeoutError:
            raise ConnectTimeout(f"no connection to {self.host}:{self.port} in {self.connect_timeout_s:.1f}s") from None
        except OSError as exc:
            raise ConnectError(_connect_reason(exc, self.host, self.port)) from None
        self._open.add(conn)
        if self.closed:  # closed while connecting
            conn.close()
            raise TransportError("the client was closed")
        return conn

    async def aclose(self) -> None:
        """Close every connection, idle or in use, and wait (briefly) until their transports are gone."""
        self.closed = True
        conns, self._idle = list(self._open), []
        for conn in conns:
            conn.close()
        pending = [conn.lost for conn in conns if not conn.lost.done()]
        if pending:
            await asyncio.wait(pending, timeout=2.0)

