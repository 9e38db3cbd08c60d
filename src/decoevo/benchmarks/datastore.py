"""The local benchmark data cache behind `decoevo data`: where each benchmark's files live, fetching and
verifying them, and resolving `--benchmark NAME[:split]` and `--data URL` to a local path.

Layout: `<root>/<benchmark>/<file>` plus `<root>/<benchmark>/checksums.json`, which records the sha256
of every unpinned file fetched. A download lands in `<root>/<benchmark>/.incoming/` and moves to its
final name only once it is verified: its pinned sha256, and for the split as a whole, the benchmark's
loader reads it and finds the published number of questions. A wrong, truncated or HTML file is therefore
never recorded as the truth, and no download runs past its file's size ceiling.
Root: `$DECOEVO_DATA`, else the platform's user cache directory + `decoevo/data`.
`$DECOEVO_DATA_MIRROR` replaces the upstream hosts: `https://HOST/PATH` is fetched from
`$DECOEVO_DATA_MIRROR/HOST/PATH` (an internal mirror, or the tests' local server).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Literal
from urllib.parse import unquote, urlsplit

from ..errors import UserError
from ..fileio import atomic_write_text
from ..lm.errors import ConfigError
from ..redact import redact, register_url_secrets
from .download import FetchError, Progress, Unreachable, download, part_path, sha256_of, shown, unchanged
from .record import Benchmark, DataFile, Split
from .registry import BENCHMARKS, get_benchmark

CHECKSUMS = "checksums.json"
INCOMING = ".incoming"  # downloads before they are verified; never read by a loader
URL_CEILING = 512 << 20  # `--data URL`: no question file comes near it; an endless body stops here
SOURCE_META = "source.json"  # `--data URL`: the sha256, ETag and Last-Modified of the copy kept


class InvalidDownload(FetchError):
    """Downloaded whole, but not the benchmark's file: the loader refuses it or finds the wrong count."""


def check_url(url: str, what: str) -> None:
    """A one-line ConfigError unless `url` is an http(s) URL with a host (and a port, when given, that
    is a number in range)."""
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError as exc:
        raise ConfigError(f"{what} {shown(url)!r} is not a valid URL ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or not url.isprintable() or " " in url:
        raise ConfigError(f"{what} {shown(url)!r} is not an http(s) URL with a host")


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
    """The URL to fetch: upstream, or its copy under `$DECOEVO_DATA_MIRROR` (refused in one line when
    that is not an http(s) URL)."""
    mirror = os.environ.get("DECOEVO_DATA_MIRROR")
    if not mirror:
        return url
    register_url_secrets(mirror)  # its credentials are masked in every message that quotes the URL
    check_url(mirror, "DECOEVO_DATA_MIRROR")
    parts = urlsplit(url)
    return f"{mirror.rstrip('/')}/{parts.netloc}{parts.path}"


def offline_hint(fmt: str | None) -> str:
    """What to try when the data host cannot be reached."""
    mirror = os.environ.get("DECOEVO_DATA_MIRROR")
    copy = f"--data FILE --format {fmt}" if fmt else "--data FILE --format NAME"
    if mirror:
        return (f"the mirror DECOEVO_DATA_MIRROR={shown(mirror)} could not be reached: check it, or run with a "
                f"copy of the file you already have: `{copy}`")
    return ("offline? point DECOEVO_DATA_MIRROR at a mirror that serves HOST/PATH of the upstream files, or run "
            f"with a copy of the file you already have: `{copy}`")


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


def _forget(bench: Benchmark, name: str) -> None:
    recorded = _recorded(bench)
    if recorded.pop(name, None) is not None:
        atomic_write_text(folder(bench) / CHECKSUMS, json.dumps(recorded, indent=2, sort_keys=True) + "\n")


def expected_sha(bench: Benchmark, f: DataFile) -> str | None:
    """The pinned checksum, else the one recorded when the file was fetched and validated (None before)."""
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
        state: FileState = "partial" if part_path(path.parent / INCOMING / f.name).exists() else "missing"
        return FileStatus(f, path, state)
    want = expected_sha(bench, f)
    if not hash_it:
        return FileStatus(f, path, "ok")
    got = sha256_of(path)
    if want is None:
        return FileStatus(f, path, "unpinned", f"sha256 {got}, no checksum to compare with")
    if got != want:
        return FileStatus(f, path, "mismatch", f"sha256 {got}, expected {want}")
    return FileStatus(f, path, "ok", "" if f.sha256 else "checked against the checksum recorded at validation")


def fetch_command(bench: Benchmark, split: Split) -> str:
    default = bench.source is not None and split is bench.source.default_split
    return f"decoevo data fetch {bench.name}" + ("" if default else f":{split.name}")


def fetch(spec: str, *, on_file: Callable[[DataFile, int | None], Progress | None] | None = None,
          force: bool = False) -> tuple[Path, list[str]]:
    """Fetch the files of `NAME[:split]` that are not already here and verified; returns the loader path
    and the names of the files actually downloaded (empty when everything was in place).

    Nothing reaches its final name before the whole split validates (`validate_split`); a split with an
    unpinned file is validated again on every fetch, so a file an older version trusted on first use
    is checked too."""
    bench, split = parse_spec(spec)
    home = folder(bench)
    urls = {f.name: source_url(f.url) for f in split.files}  # a bad mirror is refused before any download
    fresh: list[DataFile] = []
    for f in split.files:
        dest = home / f.name
        if dest.is_file() and not force and sha256_of(dest) == expected_sha(bench, f):
            continue
        progress = on_file(f, f.size) if on_file is not None else None
        try:
            download(urls[f.name], home / INCOMING / f.name, f.sha256, on_progress=progress,
                     limit=f.ceiling())
        except Unreachable as exc:
            raise Unreachable(f"{exc}; {offline_hint(bench.name)}") from None
        fresh.append(f)
    if fresh or any(f.sha256 is None for f in split.files):
        try:
            validate_split(bench, split, home, [f.name for f in fresh])
        except InvalidDownload:
            for f in split.files:
                (home / INCOMING / f.name).unlink(missing_ok=True)
                if f.sha256 is None:  # an unpinned file here cannot be trusted either
                    (home / f.name).unlink(missing_ok=True)
                    _forget(bench, f.name)
            raise
        for f in fresh:
            got = sha256_of(home / INCOMING / f.name)
            os.replace(home / INCOMING / f.name, home / f.name)
            if f.sha256 is None:
                _record(bench, f.name, got)
    with contextlib.suppress(OSError):
        (home / INCOMING).rmdir()  # kept while it holds another split's interrupted download
    return split.loader_path(home), [f.name for f in fresh]


def validate_split(bench: Benchmark, split: Split, home: Path, fresh: list[str]) -> None:
    """The split as it would be once `fresh` (in `.incoming`) join the files already here: the
    benchmark's loader reads it, and it holds the published number of questions. InvalidDownload if not."""
    incoming = home / INCOMING
    incoming.mkdir(parents=True, exist_ok=True)
    linked = []
    for f in split.files:
        if f.name not in fresh:
            try:
                os.link(home / f.name, incoming / f.name)
            except OSError:
                shutil.copyfile(home / f.name, incoming / f.name)
            linked.append(incoming / f.name)
    try:
        try:
            count = len(bench.load(split.loader_path(incoming)))
        except UserError as exc:
            raise InvalidDownload(f"{bench.label} ({split.name}) as downloaded is not the benchmark's file: {exc}; "
                                  "nothing was kept (a wrong or truncated file: check the URL or "
                                  "DECOEVO_DATA_MIRROR)") from None
        if split.records is not None and count != split.records:
            raise InvalidDownload(f"{bench.label} ({split.name}) as downloaded holds {count:,} questions where "
                                  f"the published files hold {split.records:,}; nothing was kept (a wrong or "
                                  "truncated file: check the URL or DECOEVO_DATA_MIRROR)")
    finally:
        for path in linked:
            path.unlink(missing_ok=True)


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

Notice = Callable[[str], None]


def resolve_data(data: str, *, on_file: Callable[[DataFile, int | None], Progress | None] | None = None,
                 validate: Callable[[Path], object] | None = None, on_notice: Notice | None = None) -> str:
    """A local path for `--data`: a path as is; an http(s) URL downloaded into the cache (kept only when
    `validate` accepts it, and downloaded again when the server says it changed);
    `hf://datasets/OWNER/NAME/PATH[@REVISION]` through huggingface_hub."""
    if data.startswith("hf://"):
        return _from_hub(data)
    if data.startswith(("https://", "http://")):
        register_url_secrets(data)  # its credentials are masked in every message that quotes the URL
        return _from_url(data, on_file, validate, on_notice)
    return data


def _safe_name(url: str) -> str:
    """The URL's file name, usable as one (`..`, `/` or control characters never reach the file system)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", PurePosixPath(unquote(urlsplit(url).path)).name).lstrip(".")
    return name[-100:] or "data"


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return meta if isinstance(meta, dict) else {}


def _from_url(url: str, on_file: Callable[[DataFile, int | None], Progress | None] | None,
              validate: Callable[[Path], object] | None, on_notice: Notice | None) -> str:
    check_url(url, "--data")
    name = _safe_name(url)
    home = data_root() / "urls" / hashlib.sha256(url.encode("utf-8")).hexdigest()[:16]
    dest, incoming = home / name, home / INCOMING / name
    kept = _read_meta(home / SOURCE_META)
    fetch_from = source_url(url)
    copy_intact = dest.is_file() and kept.get("sha256") == sha256_of(dest)
    if copy_intact:
        current = unchanged(fetch_from, kept.get("etag"), kept.get("last_modified"))
        if current:
            return str(dest)
        if current is None:
            if on_notice is not None:
                on_notice(f"{shown(url)} could not be reached to check that it is unchanged; using the copy "
                          f"downloaded before ({dest})")
            return str(dest)
    progress = on_file(DataFile(name, url, None), None) if on_file is not None else None
    meta: dict[str, str] = {}
    try:
        got = download(fetch_from, incoming, None, on_progress=progress, limit=URL_CEILING, meta=meta)
    except Unreachable as exc:
        if dest.is_file() and kept.get("sha256") and not copy_intact:  # why a download was needed
            raise ConfigError(f"{dest}: the copy of {shown(url)} downloaded before changed since (its sha256 is "
                              f"no longer the one recorded), and a new copy cannot be downloaded: {exc}; "
                              f"{offline_hint(None)}") from None
        raise ConfigError(f"{exc}; {offline_hint(None)}") from None
    except FetchError as exc:
        raise ConfigError(redact(str(exc))) from None
    if validate is not None:
        try:
            validate(incoming)
        except UserError as exc:
            incoming.unlink(missing_ok=True)
            raise ConfigError(f"{shown(url)}: downloaded, but not usable: {exc}; nothing was kept") from None
    if kept.get("sha256") not in (None, got) and on_notice is not None:
        on_notice(f"{shown(url)} changed since it was last downloaded; using the new version")
    os.replace(incoming, dest)
    atomic_write_text(home / SOURCE_META, json.dumps({"sha256": got, "etag": meta.get("ETag"),
                                                      "last_modified": meta.get("Last-Modified")}) + "\n")
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
                on_file: Callable[[DataFile, int | None], Progress | None] | None = None,
                on_notice: Notice | None = None) -> tuple[str | None, str | None]:
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
        # A URL's download is kept only when its format's loader reads it (an unknown format is refused
        # before any download); a local path is checked by the run, with the configuration's own message.
        loader = get_benchmark(fmt or "jsonl").load if data.startswith(("https://", "http://")) else None
        return resolve_data(data, on_file=on_file, validate=loader, on_notice=on_notice), fmt
    if fmt and fmt != "healthbench":
        bench = get_benchmark(fmt)
        hint = f" or `--benchmark {fmt}` after `decoevo data fetch {fmt}`" if bench.source is not None else ""
        raise ConfigError(f"--format {fmt} needs its data: pass --data FILE{hint}")
    return None, fmt
