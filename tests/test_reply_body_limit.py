"""decoevo.lm.bounded_body.read_bounded on scripted streams: a plain (unencoded) body is read as sent, and the
ceiling is exact: a body of exactly `limit` bytes is read, one byte more is refused, encoded or not."""

from __future__ import annotations

import gzip
import zlib

import pytest

from decoevo.lm.bounded_body import read_bounded
from decoevo.lm.errors import OversizedReply


class Stream:
    """The body in pieces of at most `piece` bytes, whatever size is asked for."""

    def __init__(self, body: bytes, piece: int = 1000) -> None:
        self.body, self.piece = body, piece

    async def read(self, n: int) -> bytes:
        out, self.body = self.body[:min(n, self.piece)], self.body[min(n, self.piece):]
        return out


def _encoded(body: bytes, encoding: str) -> bytes:
    return {"": body, "identity": body, "gzip": gzip.compress(body), "deflate": zlib.compress(body)}[encoding]


@pytest.mark.parametrize("headers", [{}, {"Content-Encoding": ""}, {"Content-Encoding": "identity"}],
                         ids=["no header", "empty", "identity"])
async def test_a_body_sent_without_an_encoding_is_read_as_sent(headers: dict[str, str]) -> None:
    body = b'{"choices": []}' * 300
    assert await read_bounded(Stream(body), headers, 1 << 20, "s") == body  # type: ignore[arg-type]


@pytest.mark.parametrize("encoding", ["", "gzip", "deflate"])
async def test_a_body_of_exactly_the_limit_is_read_and_one_byte_more_is_refused(encoding: str) -> None:
    limit = 5000
    exact = bytes(range(256)) * 19 + b"x" * (limit - 256 * 19)
    headers = {"Content-Encoding": encoding} if encoding else {}
    assert await read_bounded(Stream(_encoded(exact, encoding)), headers, limit, "s") == exact  # type: ignore[arg-type]
    with pytest.raises(OversizedReply, match="ran past"):
        await read_bounded(Stream(_encoded(exact + b"!", encoding)), headers, limit, "s")  # type: ignore[arg-type]
