"""Transcript members come from one deflate stream cut at full flushes (`rundir/transcripts.py`, issue 47.1):
each must still be a whole gzip member that inflates on its own (a reader drops a torn last member, and a resume
appends after it), and the file must read with the real `gzip` tool."""

from __future__ import annotations

import gzip
import random
import shutil
import string
import subprocess
import zlib
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from decoevo.rundir.transcripts import TRANSCRIPTS, MemberPacker, TranscriptEntry, read_transcripts
from decoevo.rundir.writer import RunWriter

# Texts that repeat each other: a member that kept a reference to an earlier one would not inflate alone.
_WORDS = random.Random(0)
SKILL = " ".join("".join(_WORDS.choice(string.ascii_lowercase) for _ in range(_WORDS.randint(2, 9)))
                 for _ in range(400))


def _texts() -> list[bytes]:
    return [b"", SKILL.encode(), (SKILL + "question 1").encode(), "é\u2028\x00\x1f".encode() * 500,
            (SKILL * 3).encode(), bytes(range(256)) * 64, SKILL.encode()]


def _inflate_alone(member: bytes) -> bytes:
    d = zlib.decompressobj(wbits=31)
    out = d.decompress(member) + d.flush()
    assert d.eof and d.unused_data == b""  # exactly one whole member
    return out


def test_each_member_inflates_alone_and_the_file_reads_with_the_gzip_tool(tmp_path: Path) -> None:
    packer = MemberPacker()
    texts = _texts()
    members = [packer.member(t) for t in texts]
    assert [_inflate_alone(m) for m in members] == texts
    path = tmp_path / "t.gz"
    path.write_bytes(b"".join(members))
    assert gzip.decompress(path.read_bytes()) == b"".join(texts)
    tool = shutil.which("gzip")
    if tool is None:
        pytest.skip("no gzip tool on this machine")
    done = subprocess.run([tool, "-dc", str(path)], capture_output=True, check=True)
    assert done.stdout == b"".join(texts)
    subprocess.run([tool, "-t", str(path)], check=True)  # CRC and length of every member checked


def test_the_texts_above_would_refer_back_without_the_full_flush() -> None:
    """Guard on the guard: the repeated texts above are ones a shared stream without full flushes would
    compress against each other, so the test above fails if the flush stops resetting the stream."""
    deflate = zlib.compressobj(1, zlib.DEFLATED, -zlib.MAX_WBITS)
    first = deflate.compress(SKILL.encode()) + deflate.flush(zlib.Z_SYNC_FLUSH)
    second = deflate.compress(SKILL.encode()) + deflate.flush(zlib.Z_SYNC_FLUSH)
    assert len(second) < len(first) / 4  # it refers back: not a stream of its own


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(max_size=3000) | st.text(max_size=800).map(lambda t: t.encode("utf-8", "surrogatepass")),
                max_size=6))
def test_any_texts_make_members_that_inflate_alone(texts: list[bytes]) -> None:
    packer = MemberPacker()
    for text in texts + texts:  # each twice: the second could refer back to the first
        assert _inflate_alone(packer.member(text)) == text


def test_a_run_writers_transcript_reads_back_and_survives_a_torn_member(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path)
    entries = [TranscriptEntry(key=f"k{i}", role="judge", model="m", phase="step 0",
                               messages=[{"role": "system", "content": SKILL}, {"role": "user", "content": f"q{i}"}],
                               reply=f"reply {i}") for i in range(5)]
    for entry in entries:
        writer.record_transcript(entry)
    writer.close()
    assert [e.key for e in read_transcripts(tmp_path / TRANSCRIPTS)] == [e.key for e in entries]
    path = tmp_path / TRANSCRIPTS
    data = path.read_bytes()
    path.write_bytes(data[:-7])  # a kill tore the last member
    assert [e.key for e in read_transcripts(tmp_path / TRANSCRIPTS)] == [e.key for e in entries[:-1]]
