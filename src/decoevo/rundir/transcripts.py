"""Each model request a run made and the reply it got, kept in the run itself (`transcripts.jsonl.gz`),
so a run copied to another machine can be inspected and reported without the shared request cache.

One entry per distinct request (its cache key), tagged with the phase that made it ("step 3",
"outer 1", "start"). Every entry is its own gzip member appended to the file: a gzip reader reads the
members as one stream, and a kill can only tear the last member, which the reader drops.
"""

from __future__ import annotations

import json
import struct
import threading
import zlib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..redact import mask_secrets
from .files import AppendFiles, dumps_json_line

TRANSCRIPTS = "transcripts.jsonl.gz"
_PIECE = 4096  # compressed bytes fed to the decompressor at a time when reading (an entry is ~2 KiB)


class TranscriptEntry(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)

    key: str
    role: str
    model: str
    phase: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)
    structured: bool = False
    reply: str = ""


# A gzip member's header as `gzip.compress(mtime=0, compresslevel=1)` writes it: deflate, no name, no time,
# "fastest" (XFL 4), made on Unix (OS 3).
_MEMBER_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x04\x03"
# An empty final block of fixed Huffman codes (BFINAL 1, BTYPE 01, end-of-block): ends a member's deflate data.
_LAST_BLOCK = b"\x03\x00"


class MemberPacker:
    """Each text as a gzip member of its own, made by one deflate stream cut at full flushes. A new compressor a
    member (what `gzip.compress` does) cost more than compressing the text: zlib allocates and clears ~256 KiB
    to start one, ~80 of ~150 µs for a paid call's ~7 KiB entry. At a full flush zlib forgets every earlier
    byte (it is a restart point for inflating), so what one text makes is a whole deflate stream once the empty
    final block is added, and each member inflates alone (tests/test_transcript_members.py, with `gzip -dc`)."""

    def __init__(self) -> None:
        self._deflate = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS)
        self._lock = threading.Lock()  # the stream is shared state: one member at a time

    def member(self, data: bytes) -> bytes:
        with self._lock:
            deflated = self._deflate.compress(data) + self._deflate.flush(zlib.Z_FULL_FLUSH)
        trailer = struct.pack("<II", zlib.crc32(data), len(data) & 0xFFFFFFFF)
        return b"".join((_MEMBER_HEADER, deflated, _LAST_BLOCK, trailer))


def transcript_member(entry: TranscriptEntry | Mapping[str, Any], packer: MemberPacker | None = None) -> bytes:
    """One entry as the gzip member appended to the file: its JSON line with every secret masked (once, on
    the whole line: requests and replies keep none). An entry may come as the mapping of a
    `TranscriptEntry`'s fields (the engine builds it so: a model made and dumped again per paid call cost
    more than the line's JSON). Level 1: at gzip's default 9 a member took twice as long, for files about a
    third smaller."""
    record = entry.model_dump(mode="json") if isinstance(entry, TranscriptEntry) else entry
    line = mask_secrets(dumps_json_line(record))
    return (packer or MemberPacker()).member((line + "\n").encode("utf-8"))


def append_transcript(root: Path, entry: TranscriptEntry | Mapping[str, Any]) -> None:
    """One entry appended with the file opened for it alone (`RunWriter` keeps its file open instead). Not
    fsynced: a transcript is for reading; the call log is the record."""
    files = AppendFiles(root)
    try:
        files.append(root / TRANSCRIPTS, transcript_member(entry))
    finally:
        files.close()


def _members(data: bytes) -> Iterator[bytes]:
    """The decompressed gzip members of `data`, up to the first torn or damaged one. The input goes to
    the decompressor in bounded pieces, so finding where a member ends copies at most one piece: handing
    it the whole rest of the file (and keeping what it left over) made reading quadratic in the run's length."""
    view, pos = memoryview(data), 0
    while pos < len(view):
        d = zlib.decompressobj(wbits=31)
        parts = []
        while not d.eof and pos < len(view):
            piece = view[pos:pos + _PIECE]
            try:
                parts.append(d.decompress(piece))
            except zlib.error:
                return
            pos += len(piece)
        if not d.eof:  # cut short
            return
        pos -= len(d.unused_data)
        yield b"".join(parts)


def read_transcripts(path: Path) -> list[TranscriptEntry]:
    """Every complete entry; a torn last member (a kill mid-append) and bad lines are skipped."""
    if not path.is_file():
        return []
    out = []
    for line in b"".join(_members(path.read_bytes())).splitlines():
        try:
            out.append(TranscriptEntry.model_validate(json.loads(line)))
        except ValueError:
            continue
    return out
