"""Reading a model server's reply body to a ceiling, decoded by us.

aiohttp's own decompression inflates each piece the socket delivers in one call, whatever it inflates to
(a 256 KiB read of zeros at gzip's ~1000:1 is 256 MiB before any check can run). So the session is made with
`auto_decompress=False` and the body is inflated here with zlib's `max_length`: memory stays within the
ceiling plus one chunk however the bytes arrive (tests/test_transport_bounds.py hands a whole bomb over in
one read)."""

from __future__ import annotations

import zlib
from collections.abc import Mapping

import aiohttp

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


async def read_bounded(content: aiohttp.StreamReader, headers: Mapping[str, str], limit: int, where: str) -> bytes:
    """The body, decoded, read a chunk at a time; an OversizedReply as soon as it passes `limit` bytes.
    No step holds more than `limit` + one chunk of decoded bytes."""
    encoding = headers.get("Content-Encoding", "")
    decoder = _decoder(encoding, where)
    parts: list[bytes] = []
    got = 0

    def take(data: bytes) -> None:
        nonlocal got
        got += len(data)
        if got > limit:
            raise _too_big(where, limit)
        parts.append(data)

    while chunk := await content.read(READ_CHUNK):
        if decoder is None:
            take(chunk)
            continue
        pending = chunk
        while pending:
            try:
                take(decoder.decompress(pending, limit + 1 - got))
            except zlib.error as exc:
                raise RetryableError(f"the reply from {where} is not valid {encoding} ({exc})",
                                     may_be_billed=True) from None
            pending = decoder.unconsumed_tail
            if decoder.eof and decoder.unused_data:  # gzip allows members one after another (RFC 1952)
                pending = decoder.unused_data + pending
                decoder = _decoder(encoding, where)
                assert decoder is not None
    if decoder is not None:
        take(decoder.flush())
    return b"".join(parts)
