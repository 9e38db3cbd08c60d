"""provenance.json: every new run records versions, the platform, the sha256 of the files it reads, what
each model is (the server's /models answer, or the GGUF's digest, cached), and the checkout's commit;
never the API key, and never a failed run because something could not be found out."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import secrets
import subprocess
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.engine import provenance
from decoevo.rundir import RunReader
from decoevo.rundir.records import Provenance
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

from .real_model import llama_cpp_server, requires_model

pytest.importorskip("uvicorn")
runner = CliRunner()
Scope = MutableMapping[str, Any]


class ModelsAnswer:
    """ASGI wrapper over the toy server that answers GET /v1/models itself: `echo` puts the request's
    Authorization header into the answer (a careless server), `fail` answers 500."""

    def __init__(self, app: Any, mode: str) -> None:
        self.app, self.mode = app, mode

    async def __call__(self, scope: Scope, receive: Callable[[], Awaitable[Any]],
                       send: Callable[[Any], Awaitable[None]]) -> None:
        if scope["type"] != "http" or scope["path"] != "/v1/models" or self.mode == "plain":
            return await self.app(scope, receive, send)
        auth = dict(scope["headers"]).get(b"authorization", b"").decode()
        status, body = (500, b"{}") if self.mode == "fail" else (200, json.dumps(
            {"object": "list", "data": [{"id": "toy", "object": "model", "owned_by": "me",
                                         "note": f"you sent {auth}", "meta": {"n_params": 135}}]}).encode())
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": body})


def run_toy(tmp: Path, mode: str, key: str, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp / "cache.sqlite"))
    monkeypatch.setenv("DECOEVO_TEST_KEY", key)
    data = write_toy_questions(tmp / "toy.jsonl")
    spec = tmp / "spec.txt"
    spec.write_text("Answers name a red flag and a next step.\n")
    with serve_app(ModelsAnswer(toy_server().app(), mode)) as url:
        args = toy_run_args(f"{url}/v1", data, tmp / "runs", "r", steps=1,
                            sets=("lm.models.default.api_key_env=DECOEVO_TEST_KEY",))
        result = runner.invoke(app, [*args, "--task-spec", str(spec)])
    assert result.exit_code == 0, result.output
    return tmp / "runs" / "r"


@pytest.mark.parametrize("mode", ["echo", "fail"])
def test_run_records_provenance_without_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str) -> None:
    key = f"sk-test-{secrets.token_hex(16)}"
    run = run_toy(tmp_path, mode, key, monkeypatch)
    raw = (run / "provenance.json").read_text()
    assert key not in raw and key.removeprefix("sk-test-") not in raw
    prov = RunReader(run).model(Provenance, "provenance.json")
    files = {f.role: f for f in prov.files}
    assert files["data"].sha256 == hashlib.sha256((tmp_path / "toy.jsonl").read_bytes()).hexdigest()
    assert files["task_spec"].sha256 == hashlib.sha256((tmp_path / "spec.txt").read_bytes()).hexdigest()
    assert prov.decoevo and prov.python == sys.version.split()[0]
    assert prov.packages["pydantic"] and prov.packages["aiohttp"] and prov.packages["numpy"]
    (model,) = prov.models
    assert model.backend == "openai" and model.model == "toy" and "(every other role)" in model.roles
    if mode == "echo":  # the server's own answer, with the echoed key masked
        assert model.served is not None and model.served["owned_by"] == "me"
        assert model.served["meta"] == {"n_params": 135} and "[redacted]" in model.served["note"]
        assert model.error is None
    else:  # unknown, with the reason; the run itself finished
        assert model.served is None and "500" in str(model.error)
        assert RunReader(run).status() == "finished"
    out = tmp_path / "report.html"
    assert runner.invoke(app, ["report", str(run), "-o", str(out)]).exit_code == 0
    html = out.read_text()
    assert "Provenance" in html and files["data"].sha256 in html and key not in html


def test_served_model_listed_by_the_toy_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_toy(tmp_path, "plain", "sk-test-unused-key", monkeypatch)
    (model,) = RunReader(run).model(Provenance, "provenance.json").models
    assert model.served == {"id": "toy", "object": "model", "owned_by": "decoevo-tests"}
    assert model.served_ids == ["toy"]


def test_resume_keeps_the_first_provenance(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run = run_toy(tmp_path, "plain", "sk-test-unused-key", monkeypatch)
    before = (run / "provenance.json").read_bytes()
    with serve_app(toy_server().app()):
        assert runner.invoke(app, ["resume", str(run)]).exit_code == 0
    assert (run / "provenance.json").read_bytes() == before


def test_gguf_digest_is_computed_once_per_file_version(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    weights = tmp_path / "m.gguf"
    weights.write_bytes(b"GGUF" + bytes(range(256)) * 5000)
    cache = tmp_path / "digests.json"
    expected = hashlib.sha256(weights.read_bytes()).hexdigest()
    assert provenance.cached_gguf_sha256(weights, cache) == expected

    def no_hashing(path: Path) -> str:
        raise AssertionError("hashed again")

    monkeypatch.setattr(provenance, "sha256_file", no_hashing)
    assert provenance.cached_gguf_sha256(weights, cache) == expected  # from the cache
    weights.write_bytes(b"GGUF changed")
    monkeypatch.undo()
    assert provenance.cached_gguf_sha256(weights, cache) == hashlib.sha256(b"GGUF changed").hexdigest()


def test_local_model_identity_and_a_missing_gguf(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from decoevo.engine.config import config_from_dict

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    weights = tmp_path / "w.gguf"
    weights.write_bytes(b"GGUF weights")
    config = config_from_dict({"data": {"path": str(tmp_path / "gone.jsonl")}, "lm": {"models": {
        "default": {"gguf_path": str(weights)}, "judge": {"gguf_path": str(tmp_path / "none.gguf")}},
        "roles": {"judge": "judge"}}}, source="test")
    prov = provenance.gather_provenance(config.lm, config.data.path)
    by_name = {m.name: m for m in prov.models}
    assert by_name["default"].gguf_sha256 == hashlib.sha256(b"GGUF weights").hexdigest()
    assert by_name["judge"].gguf_sha256 is None and by_name["judge"].roles == ["judge"]
    assert "none.gguf" in str(by_name["judge"].error)
    assert prov.files[0].sha256 is None and prov.files[0].error  # unreadable data: recorded, not raised
    assert (tmp_path / "xdg" / "decoevo" / "gguf-sha256.json").is_file()


def test_git_commit_only_for_a_decoevo_checkout(tmp_path: Path) -> None:
    src = Path(provenance.__file__).parents[1]  # .../src/decoevo
    info = provenance.git_info(src)
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        pytest.skip("not running from a git checkout")
    assert info is not None and info.commit == head.stdout.strip()
    # an installed copy inside some other repository (a venv in a checkout) is not that checkout
    fake = tmp_path / "repo" / ".venv" / "lib" / "decoevo"
    fake.mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(tmp_path / "repo")], check=True)
    assert provenance.git_info(fake) is None


@requires_model
@pytest.mark.real_model
def test_real_identities_embedded_gguf_and_llama_cpp_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedded default's weights digest, and llama-cpp-python's server describing the model it serves."""
    from decoevo.engine.config import config_from_dict
    from decoevo.lm.local import default_gguf_path

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    with llama_cpp_server() as base_url:
        config = config_from_dict({"data": {"path": str(tmp_path / "q.jsonl")}, "lm": {
            "models": {"default": {}, "judge": {"backend": "openai", "model": "smollm2", "base_url": base_url}},
            "roles": {"judge": "judge"}}}, source="test")
        prov = provenance.gather_provenance(config.lm, config.data.path)
    local, served = prov.models
    assert local.gguf_sha256 == hashlib.sha256(default_gguf_path().read_bytes()).hexdigest()
    assert local.gguf_path == str(default_gguf_path()) and local.error is None
    assert served.served is not None and served.served["id"] == "smollm2" and served.error is None
    assert prov.packages["llama-cpp-python"]


class _Metadata(importlib.metadata.Distribution):
    """A distribution whose METADATA is `text` (for the header reader's edge cases)."""

    def __init__(self, text: str | None) -> None:
        self.text = text

    def read_text(self, filename: str) -> str | None:
        return self.text if filename == "METADATA" else None

    def locate_file(self, path: Any) -> Any:
        raise NotImplementedError


def test_package_versions_read_as_importlib_reads_them():
    """The versions in provenance.json come from the metadata's header lines alone (not the whole file parsed as
    an email message, ~20 ms before every run's first call): the same answer as `importlib.metadata` for every
    distribution installed here, and for headers folded, in CRLF, spaced or missing."""
    from decoevo.engine.provenance import PACKAGES, distribution_version, package_versions

    dists = list(importlib.metadata.distributions())
    assert len(dists) > 10  # not vacuous
    assert [distribution_version(d) for d in dists] == [d.version for d in dists]
    assert package_versions() == {name: importlib.metadata.version(name) if _installed(name) else None
                                  for name in PACKAGES}
    for text in ("Metadata-Version: 2.1\nName: x\nVersion: 1.2.3\n\nVersion: 9\n",
                 "Metadata-Version: 2.1\r\nName: x\r\nVersion:  4.5 \r\n\r\nbody",
                 "Metadata-Version: 2.1\nSummary: a\n  folded\nVersion: 7\n",  # folded: importlib reads it
                 "Name: x\n\nVersion: 2\n", "no headers at all\n", "", None, "version: 0.1\n"):
        dist = _Metadata(text)
        assert distribution_version(dist) == dist.version, repr(text)


def _installed(name: str) -> bool:
    try:
        importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True
