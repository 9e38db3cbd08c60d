"""`decoevo data` and `--benchmark`/`--data URL`, offline: a local HTTP server on 127.0.0.1 serves copies
of the shared benchmark files under the layout `DECOEVO_DATA_MIRROR` expects (HOST/PATH)."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from hashlib import sha256
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.benchmarks import BENCHMARKS, datastore
from decoevo.benchmarks.download import ChecksumMismatch, download, sha256_of
from decoevo.cli import app

from .conftest import SHARED_DATA
from .data_helpers import unpinned

runner = CliRunner()
SCHOLAR = BENCHMARKS["scholarqa_cs"].source.splits[0].files[0]  # type: ignore[union-attr]
HARD = BENCHMARKS["healthbench"].source.split("hard").files[0]  # type: ignore[union-attr]


@dataclass
class Mirror:
    root: Path
    url: str
    requests: list[tuple[str, str | None]] = field(default_factory=list)  # (path, Range header)
    statuses: list[int] = field(default_factory=list)
    drop_once: set[str] = field(default_factory=set)  # paths whose first answer stops halfway
    drop_always: bool = False  # every answer stops halfway
    ignore_range: bool = False
    validators: bool = True  # send ETag and Last-Modified, and answer a matching If-None-Match with 304
    html: bool = False  # answer every request with an HTML page (200, text/html)
    no_length: bool = False  # no Content-Length: the body ends when the connection closes
    truncate: bool = False  # with no_length: send the first half of the body and close, as if complete
    endless: int = 0  # when > 0: send this many bytes of "x" without a length (an endless body), then stop
    sent: int = 0  # bytes the last endless answer managed to send before the client hung up
    raw: dict[str, bytes] = field(default_factory=dict)  # bodies served for exact request paths

    def put(self, upstream_url: str, source: Path) -> Path:
        parts = urlsplit(upstream_url)
        dest = self.root / parts.netloc / parts.path.lstrip("/")
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, dest)
        return dest


def _handler(mirror: Mirror) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            return None

        def do_GET(self) -> None:
            mirror.requests.append((self.path, self.headers.get("Range")))
            if mirror.html:
                page = b"<!DOCTYPE html><html><body>Sign in to continue</body></html>"
                mirror.statuses.append(200)
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(page)))
                self.end_headers()
                self.wfile.write(page)
                return
            if mirror.endless:
                self._endless()
                return
            path = mirror.root / self.path.lstrip("/")
            if self.path not in mirror.raw and not path.is_file():
                mirror.statuses.append(404)
                self.send_error(404)
                return
            body = mirror.raw[self.path] if self.path in mirror.raw else path.read_bytes()
            etag = f'"{sha256(body).hexdigest()[:16]}"'
            if mirror.validators and self.headers.get("If-None-Match") == etag:
                mirror.statuses.append(304)
                self.send_response(304)
                self.send_header("ETag", etag)
                self.end_headers()
                return
            if mirror.no_length:
                mirror.statuses.append(200)
                self.send_response(200)
                self.end_headers()
                self.wfile.write(body[: len(body) // 2] if mirror.truncate else body)
                self.close_connection = True
                return
            start = 0
            rng = self.headers.get("Range")
            if rng and not mirror.ignore_range:
                start = int(rng.removeprefix("bytes=").split("-")[0])
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            else:
                self.send_response(200)
            mirror.statuses.append(206 if start else 200)
            if mirror.validators:
                self.send_header("ETag", etag)
                self.send_header("Last-Modified", "Mon, 01 Dec 2025 10:00:00 GMT")
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            if self.path in mirror.drop_once or mirror.drop_always:
                mirror.drop_once.discard(self.path)
                self.wfile.write(body[start:start + (len(body) - start) // 2])
                self.wfile.flush()
                self.close_connection = True
                return
            self.wfile.write(body[start:])

        def _endless(self) -> None:
            mirror.statuses.append(200)
            self.send_response(200)
            self.end_headers()
            mirror.sent = 0
            block = b"x" * (1 << 16)
            try:
                while mirror.sent < mirror.endless:
                    self.wfile.write(block)
                    mirror.sent += len(block)
            except OSError:  # the client hung up
                pass
            self.close_connection = True

    return Handler


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Mirror]:
    yield from serve_mirror(tmp_path, monkeypatch)


def serve_mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Mirror]:
    """A mirror on 127.0.0.1 that DECOEVO_DATA_MIRROR points at, with the cache in tmp_path."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(m := Mirror(tmp_path / "mirror", "")))
    m.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("DECOEVO_DATA_MIRROR", m.url)
    monkeypatch.setenv("DECOEVO_DATA", str(tmp_path / "cache"))
    try:
        yield m
    finally:
        server.shutdown()
        server.server_close()


def shared(rel: str) -> Path:
    path = SHARED_DATA / rel
    if not path.exists():
        pytest.skip(f"shared data not present: {path}")
    return path


def test_fetch_verifies_and_a_second_fetch_downloads_nothing(mirror: Mirror) -> None:
    mirror.put(SCHOLAR.url, shared("scholarqa_cs/test_configs_snippets.json"))
    missing = runner.invoke(app, ["data", "path", "scholarqa_cs"])
    assert missing.exit_code == 2 and "decoevo data fetch scholarqa_cs" in missing.output
    first = runner.invoke(app, ["data", "fetch", "scholarqa_cs"])
    assert first.exit_code == 0, first.output
    local = Path(runner.invoke(app, ["data", "path", "scholarqa_cs"]).output.strip())
    assert local.is_file() and sha256_of(local) == SCHOLAR.sha256 and len(mirror.requests) == 1
    assert not list(local.parent.glob("*.part"))
    again = runner.invoke(app, ["data", "fetch", "scholarqa_cs"])
    assert again.exit_code == 0 and "already here" in again.output and len(mirror.requests) == 1
    assert runner.invoke(app, ["data", "verify", "scholarqa_cs"]).exit_code == 0
    assert len(BENCHMARKS["scholarqa_cs"].load(local)) == 110


def test_checksum_mismatch_keeps_nothing(mirror: Mirror, tmp_path: Path) -> None:
    bad = tmp_path / "tampered.json"
    bad.write_bytes(shared("scholarqa_cs/test_configs_snippets.json").read_bytes().replace(b"the", b"teh", 1))
    mirror.put(SCHOLAR.url, bad)
    result = runner.invoke(app, ["data", "fetch", "scholarqa_cs"])
    said = " ".join(result.output.split())  # wrapped at the terminal's width, never inside a URL
    assert result.exit_code == 1 and "does not match" in said and "nothing was kept" in said
    folder = datastore.data_root() / "scholarqa_cs"
    assert not (folder / SCHOLAR.name).exists() and not list(folder.glob("*.part"))


@pytest.mark.parametrize("ignore_range", [False, True], ids=["resumed", "restarted"])
def test_a_dropped_connection_is_resumed_or_restarted(mirror: Mirror, ignore_range: bool) -> None:
    served = mirror.put(SCHOLAR.url, shared("scholarqa_cs/test_configs_snippets.json"))
    path = "/" + str(served.relative_to(mirror.root))
    mirror.drop_once.add(path)
    mirror.ignore_range = ignore_range
    local, fetched = datastore.fetch("scholarqa_cs")
    assert fetched == [SCHOLAR.name] and sha256_of(local) == SCHOLAR.sha256
    assert len(mirror.requests) == 2 and mirror.requests[0][1] is None
    assert mirror.requests[1][1] == f"bytes={served.stat().st_size // 2}-"  # asked to resume where it broke


def test_a_fetch_that_keeps_failing_leaves_a_part_file_that_the_next_fetch_resumes(
        mirror: Mirror, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("decoevo.benchmarks.download.time.sleep", lambda _: None)
    served = mirror.put(SCHOLAR.url, shared("scholarqa_cs/test_configs_snippets.json"))
    mirror.drop_always = True
    result = runner.invoke(app, ["data", "fetch", "scholarqa_cs"])
    assert result.exit_code == 1 and "run the same command again to resume" in " ".join(result.output.split())
    folder = datastore.data_root() / "scholarqa_cs"
    part = folder / ".incoming" / f"{SCHOLAR.name}.part"
    assert not (folder / SCHOLAR.name).exists() and 0 < part.stat().st_size < served.stat().st_size
    kept = part.stat().st_size
    mirror.drop_always = False
    assert runner.invoke(app, ["data", "fetch", "scholarqa_cs"]).exit_code == 0
    assert mirror.requests[-1][1] == f"bytes={kept}-" and sha256_of(folder / SCHOLAR.name) == SCHOLAR.sha256
    assert not part.exists()


def test_unpinned_file_records_its_checksum_once_it_validates(mirror: Mirror,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    hard = unpinned(monkeypatch, "healthbench", "hard", records=500)  # the shared extract stands in
    mirror.put(hard.url, shared("healthbench/healthbench_eval_500.jsonl"))
    local, _ = datastore.fetch("healthbench:hard")
    bench = BENCHMARKS["healthbench"]
    assert datastore.expected_sha(bench, hard) == sha256_of(local)
    assert runner.invoke(app, ["data", "verify"]).exit_code == 0
    local.write_text("{}\n", encoding="utf-8")  # a file changed after the fetch fails verification
    result = runner.invoke(app, ["data", "verify", "healthbench:hard"])
    assert result.exit_code == 1 and "mismatch" in result.output
    listing = runner.invoke(app, ["data", "list"])
    assert listing.exit_code == 0 and "healthbench:consensus" in listing.output


def test_download_refuses_a_mismatch_directly(mirror: Mirror, tmp_path: Path) -> None:
    served = mirror.put("https://example.org/x.txt", shared("eqbench_cw_v3_sample/negative_criteria.txt"))
    dest = tmp_path / "out" / "x.txt"
    with pytest.raises(ChecksumMismatch):
        download(f"{mirror.url}/example.org/x.txt", dest, "0" * 64)
    assert not dest.exists() and not dest.with_name("x.txt.part").exists()
    assert download(f"{mirror.url}/example.org/x.txt", dest, sha256_of(served)) == sha256_of(served)


# ---- --benchmark and --data URL on run / eval ------------------------------------------------------

def test_run_with_a_benchmark_that_is_not_fetched_names_the_fetch_command(mirror: Mirror) -> None:
    result = runner.invoke(app, ["run", "--benchmark", "healthbench:hard", "--base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2 and "decoevo data fetch healthbench:hard" in result.output
    result = runner.invoke(app, ["run", "--benchmark", "healthbench:nope"])
    assert result.exit_code == 2 and "all, hard, consensus" in result.output


def test_format_without_data_never_reads_the_bundled_healthbench_file(mirror: Mirror) -> None:
    result = runner.invoke(app, ["run", "--format", "writingbench", "--base-url", "http://127.0.0.1:9/v1"])
    assert result.exit_code == 2 and "--format writingbench needs its data" in result.output
    assert "decoevo data fetch writingbench" in result.output and "healthbench" not in result.output


def test_data_url_is_downloaded_into_the_cache_once(mirror: Mirror) -> None:
    mirror.put("https://example.org/data/med.json", shared("llmeval_med_sample/dataset_sample.json"))
    url = "https://example.org/data/med.json"
    first = datastore.resolve_data(url)
    second = datastore.resolve_data(url)  # asks whether it changed: 304, nothing downloaded again
    assert first == second and Path(first).is_file() and mirror.statuses == [200, 304]
    assert str(datastore.data_root()) in first and len(BENCHMARKS["llmeval_med"].load(first)) == 20


def test_hf_uri_is_checked_before_any_download(mirror: Mirror) -> None:
    from decoevo.lm.errors import ConfigError

    with pytest.raises(ConfigError, match="OWNER/NAME/PATH"):
        datastore.resolve_data("hf://datasets/only-owner")
    with pytest.raises(ConfigError, match="hf://datasets"):
        datastore.resolve_data("hf://models/a/b/c")


def test_run_reads_data_from_a_url_and_a_fetched_benchmark(mirror: Mirror, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end on the toy world served over HTTP: `--data https://…` and `--benchmark NAME:split` both
    resolve to files in the cache, and each run records the local file it read and its format."""
    pytest.importorskip("uvicorn")
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

    questions = write_toy_questions(tmp_path / "toy.jsonl")
    mirror.put("https://example.org/toy.jsonl", questions)
    # The toy questions in HealthBench's own format stand in for HealthBench Hard.
    as_healthbench = tmp_path / "hard.jsonl"
    as_healthbench.write_text("".join(
        json.dumps({"prompt_id": q["id"], "prompt": [{"role": "user", "content": q["prompt"]}],
                    "rubrics": [{"criterion": i["text"], "points": i.get("points", 1)} for i in q["gold"]["items"]]})
        + "\n" for q in map(json.loads, questions.read_text(encoding="utf-8").splitlines())), encoding="utf-8")
    unpinned(monkeypatch, "healthbench", "hard", records=len(as_healthbench.read_text().splitlines()))
    mirror.put(HARD.url, as_healthbench)
    with serve_app(toy_server().app()) as url:
        args = toy_run_args(f"{url}/v1", questions, tmp_path / "runs", "from-url", steps=1,
                            sets=("method=zero_shot",))
        i = args.index("--data")
        url_args = [*args[:i], "--data", "https://example.org/toy.jsonl", *args[i + 2:]]
        result = runner.invoke(app, url_args)
        assert result.exit_code == 0, result.output
        config = yaml.safe_load((tmp_path / "runs" / "from-url" / "config.yaml").read_text(encoding="utf-8"))
        assert config["data"]["path"].startswith(str(datastore.data_root() / "urls"))
        assert runner.invoke(app, ["data", "fetch", "healthbench:hard"]).exit_code == 0
        bench_args = [*args[:i], *args[i + 2:], "--benchmark", "healthbench:hard"]
        bench_args[bench_args.index("--name") + 1] = "from-benchmark"
        result = runner.invoke(app, bench_args)
        assert result.exit_code == 0, result.output
    config = yaml.safe_load((tmp_path / "runs" / "from-benchmark" / "config.yaml").read_text(encoding="utf-8"))
    hard = datastore.data_root() / "healthbench" / "hard.jsonl"
    assert (config["data"]["path"], config["data"]["format"]) == (str(hard), "healthbench")


def test_sweep_and_eval_take_benchmark_names_too(mirror: Mirror, tmp_path: Path) -> None:
    def said(result: object) -> str:
        return " ".join(result.output.split())  # type: ignore[attr-defined]

    swept = runner.invoke(app, ["sweep", str(tmp_path / "SW"), "--benchmark", "writingbench"])
    assert swept.exit_code == 2 and "run `decoevo data fetch writingbench`" in said(swept)
    assert not (tmp_path / "SW").exists()
    evaluated = runner.invoke(app, ["eval", str(tmp_path / "RUN"), "--benchmark", "eqbench_cw"])
    assert evaluated.exit_code == 2 and "decoevo data fetch eqbench_cw" in said(evaluated)
    both = runner.invoke(app, ["run", "--data", "x.jsonl", "--benchmark", "writingbench"])
    assert both.exit_code == 2 and "not both" in said(both)
