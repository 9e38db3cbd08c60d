"""The local benchmark data cache behind `decoevo data`: where each benchmark's files live, fetching and
verifying them, and resolving `--benchmark NAME[:split]` and `--data URL` to a local path.

Layout: `<root>/<benchmark>/<file>` plus `<root>/<benchmark>/checksums.json`, which records the sha256
of every file fetched (the pinned one, or what the first fetch saw when the record has none).
Root: `$DECOEVO_DATA`, else the platform's user cache directory + `decoevo/data`.
`$DECOEVO_DATA_MIRROR` replaces the upstream hosts: `https://HOST/PATH` is fetched from
`$DECOEVO_DATA_MIRROR/HOST/PATH` (an internal mirror, or the tests' local server).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from ..fileio import atomic_write_text
from ..lm.errors import ConfigError
from ..redact import redact, register_url_secrets
from .download import FetchError, Progress, download, part_path, sha256_of
from .record import Benchmark, DataFile, Split
from .registry import BENCHMARKS, get_benchmark

CHECKSUMS = "checksums.json"


def data_root() -> Path:
    env = os.environ.get("DECOEVO_DATA")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    elif sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA", Path.home() / "AppData" / "Local"))
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "decoevo" / "data"


def source_url(url: str) -> str:
    """The URL to fetch: upstream, or its copy under `$DECOEVO_DATA_MIRROR`."""
    mirror = os.environ.get("DECOEVO_DATA_MIRROR")
    if not mirror:
        return url
    register_url_secrets(mirror)  # its credentials are masked in every message that quotes the URL
    parts = urlsplit(url)
    return f"{mirror.rstrip('/')}/{parts.netloc}{parts.path}"


def parse_spec(spec: str) -> tuple[Benchmark, Split]:
    """`NAME` or `NAME:SPLIT` -> the benchmark and its split (the first one when none is named)."""
    name, _, split_name = spec.partition(":")
    bench = get_benchmark(name)
    if bench.source is None:
        raise ConfigError(f"{name!r} is a format for your own files, with nothing to fetch; pass --data FILE")
    try:
        return bench, bench.source.split(split_name or None)
    except KeyError:
        known = ", ".join(s.name for s in bench.source.splits)
        raise ConfigError(f"{name} has no split {split_name!r}; known: {known}") from None


def folder(bench: Benchmark) -> Path:
    return data_root() / bench.name


def _recorded(bench: Benchmark) -> dict[str, str]:
    path = folder(bench) / CHECKSUMS
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)} if isinstance(data, dict) \
        else {}


def _record(bench: Benchmark, name: str, sha: str) -> None:
    recorded = {**_recorded(bench), name: sha}
    path = folder(bench) / CHECKSUMS
    atomic_write_text(path, json.dumps(recorded, indent=2, sort_keys=True) + "\n")


def expected_sha(bench: Benchmark, f: DataFile) -> str | None:
    """The pinned checksum, else the one the first fetch recorded (None before any fetch)."""
    return f.sha256 or _recorded(bench).get(f.name)


FileState = Literal["ok", "missing", "partial", "mismatch", "unpinned"]


@dataclass(frozen=True)
class FileStatus:
    file: DataFile
    path: Path
    state: FileState
    detail: str = ""


def file_status(bench: Benchmark, f: DataFile, *, hash_it: bool = True) -> FileStatus:
    path = folder(bench) / f.name
    if not path.is_file():
        state: FileState = "partial" if part_path(path).exists() else "missing"
        return FileStatus(f, path, state)
    want = expected_sha(bench, f)
    if not hash_it:
        return FileStatus(f, path, "ok")
    got = sha256_of(path)
    if want is None:
        return FileStatus(f, path, "unpinned", f"sha256 {got}, no checksum to compare with")
    if got != want:
        return FileStatus(f, path, "mismatch", f"sha256 {got}, expected {want}")
    return FileStatus(f, path, "ok", "" if f.sha256 else "checked against the checksum recorded at first fetch")


def fetch_command(bench: Benchmark, split: Split) -> str:
    default = bench.source is not None and split is bench.source.default_split
    return f"decoevo data fetch {bench.name}" + ("" if default else f":{split.name}")


def fetch(spec: str, *, on_file: Callable[[DataFile, int | None], Progress | None] | None = None,
          force: bool = False) -> tuple[Path, list[str]]:
    """Fetch the files of `NAME[:split]` that are not already here and verified; returns the loader path
    and the names of the files actually downloaded (empty when everything was in place)."""
    bench, split = parse_spec(spec)
    fetched = []
    for f in split.files:
        dest = folder(bench) / f.name
        want = expected_sha(bench, f)
        if dest.is_file() and not force and (want is None or sha256_of(dest) == want):
            if want is None:  # an older cache without a record: adopt what is there
                _record(bench, f.name, sha256_of(dest))
            continue
        if dest.is_file():
            dest.unlink()  # a file that fails its checksum is not kept under the final name
        progress = on_file(f, f.size) if on_file is not None else None
        got = download(source_url(f.url), dest, want, on_progress=progress)
        _record(bench, f.name, got)
        fetched.append(f.name)
    return split.loader_path(folder(bench)), fetched


def local_path(spec: str) -> Path:
    """The loader path of a fetched benchmark split; a ConfigError with the fetch command when missing."""
    bench, split = parse_spec(spec)
    missing = [f.name for f in split.files if not (folder(bench) / f.name).is_file()]
    if missing:
        raise ConfigError(f"{bench.label} ({split.name}) is not downloaded yet ({', '.join(missing)} missing "
                          f"in {folder(bench)}); run `{fetch_command(bench, split)}`")
    return split.loader_path(folder(bench))


def all_splits() -> list[tuple[Benchmark, Split]]:
    return [(b, s) for b in BENCHMARKS.values() if b.source is not None for s in b.source.splits]


# ---- --data URL and hf:// ------------------------------------------------------------------------

def resolve_data(data: str, *, on_file: Callable[[DataFile, int | None], Progress | None] | None = None) -> str:
    """A local path for `--data`: a path as is; an https URL downloaded once into the cache (its sha256
    recorded at first fetch); `hf://datasets/OWNER/NAME/PATH[@REVISION]` through huggingface_hub."""
    if data.startswith("hf://"):
        return _from_hub(data)
    if data.startswith(("https://", "http://")):
        register_url_secrets(data)  # its credentials are masked in every message that quotes the URL
        return _from_url(data, on_file)
    return data


def _from_url(url: str, on_file: Callable[[DataFile, int | None], Progress | None] | None) -> str:
    name = Path(urlsplit(url).path).name or "data"
    dest = data_root() / "urls" / hashlib.sha256(url.encode("utf-8")).hexdigest()[:16] / name
    sums = dest.parent / CHECKSUMS
    recorded = json.loads(sums.read_text(encoding="utf-8")).get(name) if sums.is_file() else None
    if dest.is_file() and (recorded is None or sha256_of(dest) == recorded):
        return str(dest)
    progress = on_file(DataFile(name, url, None), None) if on_file is not None else None
    try:
        got = download(source_url(url), dest, recorded, on_progress=progress)
    except FetchError as exc:
        raise ConfigError(redact(str(exc))) from None
    sums.write_text(json.dumps({name: got}) + "\n", encoding="utf-8")
    return str(dest)


def _from_hub(uri: str) -> str:
    rest = uri.removeprefix("hf://")
    if not rest.startswith("datasets/"):
        raise ConfigError(f"{uri}: expected hf://datasets/OWNER/NAME/PATH[@REVISION]")
    parts = rest.removeprefix("datasets/").split("/")
    if len(parts) < 3 or not all(parts):
        raise ConfigError(f"{uri}: expected hf://datasets/OWNER/NAME/PATH[@REVISION] (a file inside the dataset)")
    repo, filename = "/".join(parts[:2]), "/".join(parts[2:])
    filename, _, revision = filename.partition("@")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise ConfigError("hf:// data needs huggingface_hub: pip install 'decoevo[hf]'") from None
    try:
        return str(hf_hub_download(repo_id=repo, filename=filename, repo_type="dataset", revision=revision or None,
                                   cache_dir=str(data_root() / "hf")))
    except Exception as exc:  # offline, gated, renamed: one line, the library's own words
        raise ConfigError(f"{uri}: could not download from the Hugging Face Hub: {exc}") from None


def choose_data(data: str | None, fmt: str | None, benchmark: str | None, *,
                on_file: Callable[[DataFile, int | None], Progress | None] | None = None
                ) -> tuple[str | None, str | None]:
    """The (path, format) that `--data`, `--format` and `--benchmark NAME[:split]` name together.

    `--benchmark` resolves to the fetched file and implies its format; `--data` may be a path, an https
    URL or an hf:// file; `--format` alone is refused for anything but HealthBench (whose bundled sample
    is the default data), because there is no file of that format to read."""
    if benchmark:
        if data:
            raise ConfigError("pass --data FILE or --benchmark NAME[:split], not both")
        bench, _ = parse_spec(benchmark)
        if fmt and fmt != bench.name:
            raise ConfigError(f"--format {fmt} contradicts --benchmark {benchmark} (a {bench.name} file)")
        return str(local_path(benchmark)), bench.name
    if data:
        return resolve_data(data, on_file=on_file), fmt
    if fmt and fmt != "healthbench":
        bench = get_benchmark(fmt)
        hint = f" or `--benchmark {fmt}` after `decoevo data fetch {fmt}`" if bench.source is not None else ""
        raise ConfigError(f"--format {fmt} needs its data: pass --data FILE{hint}")
    return None, fmt
