"""Downloads that cannot be poisoned: a real HTTP server on 127.0.0.1 serves wrong, HTML, truncated,
endless and changed files, and bad mirrors and URLs are refused in one line. Nothing wrong is ever kept
under a final name or recorded as the truth."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.benchmarks import BENCHMARKS, datastore
from decoevo.benchmarks.download import sha256_of
from decoevo.cli import app
from decoevo.errors import ConfigError

from .test_data import HARD, SCHOLAR, Mirror, serve_mirror, shared, unpinned

runner = CliRunner()


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Mirror]:
    yield from serve_mirror(tmp_path, monkeypatch)


def said(result: object) -> str:
    return " ".join(result.output.split())  # type: ignore[attr-defined]


def kept_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file()] if root.exists() else []


# ---- benchmark files -------------------------------------------------------------------------------

def test_a_wrong_file_at_first_fetch_is_never_recorded_and_a_good_mirror_then_fetches(mirror: Mirror) -> None:
    """HealthBench Hard is pinned now: another (well-formed) HealthBench file is refused, nothing is kept,
    `verify` has nothing to call ok, and the next fetch downloads again."""
    mirror.put(HARD.url, shared("healthbench/healthbench_eval_500.jsonl"))
    result = runner.invoke(app, ["data", "fetch", "healthbench:hard"])
    assert result.exit_code == 1 and "does not match" in said(result) and "nothing was kept" in said(result)
    folder = datastore.data_root() / "healthbench"
    assert kept_files(folder) == []
    assert runner.invoke(app, ["data", "verify", "healthbench:hard"]).exit_code == 1  # missing, not "ok"
    again = runner.invoke(app, ["data", "fetch", "healthbench:hard"])
    assert again.exit_code == 1 and len(mirror.requests) == 2  # downloaded again, never "already here"


def test_an_unpinned_split_keeps_a_file_only_when_it_has_the_published_count(
        mirror: Mirror, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    hard = unpinned(monkeypatch, "healthbench", "hard", records=1000)
    mirror.put(hard.url, shared("healthbench/healthbench_eval_500.jsonl"))  # 500 conversations, not 1,000
    result = runner.invoke(app, ["data", "fetch", "healthbench:hard"])
    assert result.exit_code == 1, result.output
    assert "holds 500 questions where the published files hold 1,000" in said(result)
    bench = BENCHMARKS["healthbench"]
    assert kept_files(datastore.folder(bench)) == [] and datastore.expected_sha(bench, hard) is None
    # The right file (the count stands in for the published one) is then fetched and recorded.
    unpinned(monkeypatch, "healthbench", "hard", records=500)
    local, fetched = datastore.fetch("healthbench:hard")
    assert fetched == [hard.name] and datastore.expected_sha(BENCHMARKS["healthbench"], hard) == sha256_of(local)


def test_a_file_an_older_version_trusted_on_first_use_is_checked_again(
        mirror: Mirror, monkeypatch: pytest.MonkeyPatch) -> None:
    """A cache written before validation existed: a wrong file and its recorded checksum. The next fetch
    no longer says "already here, verified": it finds the file invalid and removes it with its record."""
    hard = unpinned(monkeypatch, "healthbench", "hard", records=1000)
    bench = BENCHMARKS["healthbench"]
    poisoned = datastore.folder(bench) / hard.name
    poisoned.parent.mkdir(parents=True)
    poisoned.write_bytes(shared("healthbench/healthbench_eval_500.jsonl").read_bytes())
    (poisoned.parent / "checksums.json").write_text(json.dumps({hard.name: sha256_of(poisoned)}))
    result = runner.invoke(app, ["data", "fetch", "healthbench:hard"])
    assert result.exit_code == 1 and "already here" not in result.output and "published" in said(result)
    assert not poisoned.exists() and datastore.expected_sha(bench, hard) is None and mirror.requests == []


def test_a_truncated_file_without_content_length_is_refused(
        mirror: Mirror, monkeypatch: pytest.MonkeyPatch) -> None:
    hard = unpinned(monkeypatch, "healthbench", "hard", records=500)
    mirror.put(hard.url, shared("healthbench/healthbench_eval_500.jsonl"))
    mirror.no_length = mirror.truncate = True  # half the body, then the connection closes "cleanly"
    result = runner.invoke(app, ["data", "fetch", "healthbench:hard"])
    assert result.exit_code == 1 and "nothing was kept" in said(result), result.output
    assert kept_files(datastore.folder(BENCHMARKS["healthbench"])) == []


def test_an_html_page_is_refused(mirror: Mirror, monkeypatch: pytest.MonkeyPatch) -> None:
    unpinned(monkeypatch, "healthbench", "hard", records=None)  # not even a count to compare with
    mirror.html = True
    result = runner.invoke(app, ["data", "fetch", "healthbench:hard"])
    assert result.exit_code == 1 and "HTML page" in said(result)
    assert kept_files(datastore.folder(BENCHMARKS["healthbench"])) == []


def test_an_endless_body_stops_at_the_files_ceiling(mirror: Mirror) -> None:
    """ScholarQA-CS declares 1,053,423 bytes; an endless answer is cut at that plus 5% and deleted."""
    mirror.put(SCHOLAR.url, shared("scholarqa_cs/test_configs_snippets.json"))
    mirror.endless = 64 << 20
    result = runner.invoke(app, ["data", "fetch", "scholarqa_cs"])
    assert result.exit_code == 1 and "more than the 1.1 MiB this file may have" in said(result), result.output
    assert mirror.sent < 16 << 20  # the client hung up near the ceiling (socket buffers hold the rest)
    assert kept_files(datastore.data_root()) == []


# ---- mirrors and offline ---------------------------------------------------------------------------

@pytest.mark.parametrize("value", ["not a url", "/srv/mirror", "ftp://mirror.example.org", "http://[::1",
                                   "http://127.0.0.1:99999"])
def test_a_mirror_that_is_not_an_http_url_is_one_line(mirror: Mirror, monkeypatch: pytest.MonkeyPatch,
                                                      value: str) -> None:
    monkeypatch.setenv("DECOEVO_DATA_MIRROR", value)
    result = runner.invoke(app, ["data", "fetch", "scholarqa_cs"])
    assert result.exit_code == 2 and said(result).startswith("error: DECOEVO_DATA_MIRROR"), result.output
    assert "URL" in said(result) and "bug" not in said(result)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_offline_fetch_names_the_mirror_and_a_local_copy(mirror: Mirror, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("decoevo.benchmarks.download.time.sleep", lambda _: None)
    monkeypatch.setenv("DECOEVO_DATA_MIRROR", f"http://127.0.0.1:{_closed_port()}")
    result = runner.invoke(app, ["data", "fetch", "scholarqa_cs"])
    assert result.exit_code == 1
    assert "DECOEVO_DATA_MIRROR" in said(result) and "--data FILE --format scholarqa_cs" in said(result)
    monkeypatch.delenv("DECOEVO_DATA_MIRROR")
    with pytest.raises(ConfigError, match=r"point DECOEVO_DATA_MIRROR at a mirror.*--data FILE --format NAME"):
        datastore.resolve_data(f"http://127.0.0.1:{_closed_port()}/q.jsonl")


# ---- --data URL ------------------------------------------------------------------------------------

TOY = '{"id": "q1", "prompt": "What is 2+2?"}\n{"id": "q2", "prompt": "Name a colour."}\n'


def _serve(mirror: Mirror, tmp_path: Path, text: str, name: str = "q.jsonl") -> str:
    source = tmp_path / "src" / name
    source.parent.mkdir(exist_ok=True)
    source.write_text(text, encoding="utf-8")
    mirror.put(f"https://example.org/{name}", source)
    return f"https://example.org/{name}"


def _resolve(url: str, notes: list[str] | None = None) -> str:
    path, _ = datastore.choose_data(url, None, None, on_notice=(notes.append if notes is not None else None))
    assert path is not None
    return path


def test_a_changed_upstream_is_downloaded_again_and_said(mirror: Mirror, tmp_path: Path) -> None:
    url = _serve(mirror, tmp_path, TOY)
    first = Path(_resolve(url)).read_text(encoding="utf-8")
    assert _resolve(url) and mirror.statuses == [200, 304]  # unchanged: one conditional request, no body
    _serve(mirror, tmp_path, TOY + '{"id": "q3", "prompt": "A third one."}\n')
    notes: list[str] = []
    second = Path(_resolve(url, notes)).read_text(encoding="utf-8")
    assert second != first and second.count("\n") == 3 and mirror.statuses[-1] == 200
    assert notes and "changed since it was last downloaded" in notes[0]


def test_a_server_without_validators_is_asked_again(mirror: Mirror, tmp_path: Path) -> None:
    mirror.validators = False
    url = _serve(mirror, tmp_path, TOY)
    _resolve(url)
    _serve(mirror, tmp_path, TOY.replace("colour", "color"))
    assert "color" in Path(_resolve(url)).read_text(encoding="utf-8")


def test_an_unreachable_upstream_reuses_the_copy_and_says_so(mirror: Mirror, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    url = _serve(mirror, tmp_path, TOY)
    first = _resolve(url)
    monkeypatch.setenv("DECOEVO_DATA_MIRROR", f"http://127.0.0.1:{_closed_port()}")
    notes: list[str] = []
    assert _resolve(url, notes) == first and "could not be reached" in notes[0]


@pytest.mark.parametrize("case", ["html", "truncated", "not-questions"])
def test_a_data_url_that_is_not_a_question_file_is_refused(mirror: Mirror, tmp_path: Path, case: str) -> None:
    url = _serve(mirror, tmp_path, '{"id": "q1", "prompt": "What is 2+2?", "extra": 1}\n' * 3
                 if case == "not-questions" else TOY * 50)
    mirror.html = case == "html"
    mirror.no_length = mirror.truncate = case == "truncated"
    with pytest.raises(ConfigError) as caught:
        _resolve(url)
    assert "\n" not in str(caught.value) and ("HTML page" in str(caught.value) if case == "html"
                                             else "nothing was kept" in str(caught.value))
    assert kept_files(datastore.data_root()) == []


def test_an_endless_data_url_stops_at_the_ceiling(mirror: Mirror, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(datastore, "URL_CEILING", 2 << 20)  # 512 MiB in use; the same code path, smaller
    url = _serve(mirror, tmp_path, TOY)
    mirror.endless = 64 << 20
    with pytest.raises(ConfigError, match=r"more than the 2\.0 MiB"):
        _resolve(url)
    assert mirror.sent < 16 << 20 and kept_files(datastore.data_root()) == []


@pytest.mark.parametrize("url", ["http://[::1/q.jsonl", "http://127.0.0.1:99999/q.jsonl", "http:///q.jsonl",
                                 "https://exa mple.org/q.jsonl"])
def test_a_malformed_data_url_is_one_line(mirror: Mirror, tmp_path: Path, url: str) -> None:
    result = runner.invoke(app, ["run", "--data", url, "--base-url", "http://127.0.0.1:9/v1",
                                 "--runs-root", str(tmp_path / "runs")])
    assert result.exit_code == 2 and "not" in result.output and "URL" in result.output, result.output
    assert "bug" not in result.output and kept_files(datastore.data_root()) == []


def test_a_data_url_ending_in_dot_dot_gets_a_safe_name(mirror: Mirror) -> None:
    mirror.raw["/example.org/a/.."] = TOY.encode()
    path = Path(_resolve("https://example.org/a/.."))
    assert path.name == "data" and path.read_text(encoding="utf-8") == TOY
    assert not list(datastore.data_root().rglob("*.part"))


# ---- the pins ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name,rel", [("writingbench", "writingbench/benchmark_all.jsonl"),
                                      ("scholarqa_cs", "scholarqa_cs/test_configs_snippets.json")])
def test_the_pinned_files_we_hold_match_their_pins_sizes_and_counts(name: str, rel: str) -> None:
    source = BENCHMARKS[name].source
    assert source is not None
    split = source.default_split
    (f,) = split.files
    path = shared(rel)
    assert (sha256_of(path), path.stat().st_size) == (f.sha256, f.size)
    assert len(BENCHMARKS[name].load(path)) == split.records


def test_every_published_split_has_a_count_and_every_file_a_ceiling() -> None:
    for bench, split in datastore.all_splits():
        assert split.records, f"{bench.name}:{split.name} has no published count"
        for f in split.files:
            assert f.size is not None or f.max_size is not None, f"{bench.name}/{f.name}: no size or bound"
            assert f.sha256 is not None or bench.name == "researchqa", f"{bench.name}/{f.name} is not pinned"
