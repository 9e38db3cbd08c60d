"""Reading a model server's reply body to a ceiling, decoded by us.

aiohttp's own decompression inflates each piece the socket delivers in one call, whatever it inflates to
(a 256 KiB read of zeros at gzip's ~1000:1 is 256 MiB before any check can run). So the proxied path's
session is made with `auto_decompress=False`, the direct path (`http1`) never inflates on its own, and both
inflate here with zlib's `max_length`: memory stays within the ceiling plus one chunk however the bytes
arrive (tests/test_transport_bounds.py hands a whole bomb over in one read)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Protocol

from .errors import OversizedReply, RetryableError

#: the most bytes of one decoded reply body read; a completion of 100k tokens is well under 1 MiB, so past
#: this a server is broken or hostile (a gzip bomb: 1 MiB on the wire, 1 GiB decoded) and reading stops
MAX_REPLY_BYTES = 32 << 20
READ_CHUNK = 1 << 16
#: what we ask for: encodings zlib decodes (a server that sends another one anyway is refused below)
ACCEPT_ENCODING = "gzip, deflate"


def _decoder(encoding: str, where: str) -> zlib._Decompress | None:
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return None
    if name in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if name == "deflate":
        return zlib.decompressobj(32 + zlib.MAX_WBITS)  # zlib-wrapped, as HTTP's deflate is (auto-detected)
    raise RetryableError(f"the reply from {where} is encoded as {encoding!r}, which was not asked for "
                         f"(Accept-Encoding: {ACCEPT_ENCODING}); check the server or proxy behind base_url",
                         may_be_billed=True)


def _too_big(where: str, limit: int) -> OversizedReply:
    return OversizedReply(f"the reply from {where} ran past {limit >> 20} MiB (decoded) and was not read "
                          "further: a server sending this much is broken or misconfigured (a compressed "
                          "body that inflates without end); check the server behind base_url")


class BoundedBody:
    """A reply body decoded as its bytes arrive, to a ceiling: `feed` each piece of the body as sent (an
    OversizedReply as soon as the decoded bytes pass `limit`), then `finish` for the whole. No step holds
    more than `limit` + one piece of decoded bytes: zlib inflates with `max_length`. Both transports use it
    (`read_bounded` over aiohttp's stream, `http1` as its parser meets the body)."""

    __slots__ = ("_decoder", "_encoding", "_got", "_limit", "_parts", "_where")

    def __init__(self, encoding: str, limit: int, where: str) -> None:
        self._encoding, self._limit, self._where = encoding, limit, where
        self._decoder = _decoder(encoding, where)
        self._parts: list[bytes] = []
        self._got = 0

    def _take(self, data: bytes) -> None:
        self._got += len(data)
        if self._got > self._limit:
            raise _too_big(self._where, self._limit)
        self._parts.append(data)

    def feed(self, chunk: bytes) -> None:
        decoder = self._decoder
        if decoder is None:
            self._take(chunk)
            return
        pending = chunk
        while pending:
            try:
                self._take(decoder.decompress(pending, self._limit + 1 - self._got))
            except zlib.error as exc:
                raise RetryableError(f"the reply from {self._where} is not valid {self._encoding} ({exc})",
                                     may_be_billed=True) from None
            pending = decoder.unconsumed_tail
            if decoder.eof and decoder.unused_data:  # gzip allows members one after another (RFC 1952)
                pending = decoder.unused_data + pending
                decoder = self._decoder = _decoder(self._encoding, self._where)
                assert decoder is not None

    def finish(self) -> bytes:
        if self._decoder is not None:
            self._take(self._decoder.flush())
        return self._parts[0] if len(self._parts) == 1 else b"".join(self._parts)


class _Stream(Protocol):
    async def read(self, n: int) -> bytes: ...


async def read_bounded(content: _Stream, headers: Mapping[str, str], limit: int, where: str) -> bytes:
    """The body of a stream (aiohttp's `response.content`), decoded, read a chunk at a time; an
    OversizedReply as soon as it passes `limit` bytes."""
    body = BoundedBody(headers.get("Content-Encoding", ""), limit, where)
    while chunk := await content.read(READ_CHUNK):
        body.feed(chunk)
    return body.finish()
