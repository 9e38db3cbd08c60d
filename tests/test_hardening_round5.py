"""Round five (issue 36, items 1-6 and 11-13): safety properties that no test guarded. Each test here fails
when the code it guards is broken the way the issue describes (docs/reliability.md, "Round five").

Security and data: every secret header name masked; credentials kept to one origin (scheme, host and port);
no run file written through a linked folder inside a run, nor `export -o` through a link; every
model-written string escaped in the report; every configuration key classified for resume; a checkpoint
copied from another run refused. New defects: LiteLLM's reply bodies bounded; the toy server's flags;
messages that named the wrong thing."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from decoevo.benchmarks import datastore
from decoevo.benchmarks.download import _SameOriginCredentials, origin
from decoevo.cli import app
from decoevo.domain import Skill
from decoevo.lm.backend_secrets import Redactor
from decoevo.redact import MASK, SENSITIVE_HEADERS, known_secrets, redact
from decoevo.rundir import RequestLog, RunWriter, UnsafeRunPath

from .test_transport_bounds import KEY, TOY, _basic, data_home, redirect_to, serve_bytes, serving

__all__ = ["data_home"]  # the fixture, imported for the tests below
runner = CliRunner()


def invoke(args: list[Any]) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, result.output


# ---- item 1: every secret header name is masked ---------------------------------------------------------

# The header names whose values are credentials or account identifiers (docs/reliability.md): pinned here,
# so that dropping one from the redactor's list fails its case below instead of removing the case.
SECRET_HEADERS = ("authorization", "proxy-authorization", "api-key", "x-api-key", "openai-organization",
                  "openai-project", "cookie", "set-cookie")


def test_the_redactor_treats_every_documented_header_as_secret() -> None:
    assert set(SECRET_HEADERS) <= SENSITIVE_HEADERS


@pytest.mark.parametrize("name", sorted(set(SECRET_HEADERS) | SENSITIVE_HEADERS))
def test_each_secret_header_is_masked_in_request_headers_and_in_free_text(name: str) -> None:
    """A value never registered as a secret: masked because of the header it was sent in (a server that
    echoes it in an error body or a reply), and wherever a message quotes it as that header."""
    value = "hv" + hashlib.sha256(name.encode()).hexdigest()[:14]
    assert value not in known_secrets()
    title = "-".join(p.capitalize() for p in name.split("-"))
    redactor = Redactor.for_request({title: value, "Content-Type": "application/json"})
    assert value not in redactor.text(f"HTTP 400: the server echoed {value} back")
    assert value not in json.dumps(redactor.body({"error": {"message": f"bad value {value}"}}))
    assert value not in redactor.secret_values(f"model output quoting {value}")
    for shape in (f"{title}: {value}", f"'{title}': '{value}'", f'{{"{name}": "{value}"}}', f"{name}={value}",
                  f"<CIMultiDictProxy('{title}': '{value}', 'Accept': 'application/json')>"):
        shown = redact(shape)
        assert value not in shown and MASK in shown, shape
    assert redact("'Content-Type': 'application/json'") == "'Content-Type': 'application/json'"  # others stay


# ---- item 2: an origin is scheme + host + port ----------------------------------------------------------

def test_origin_is_scheme_host_and_port() -> None:
    assert origin("https://Data.Example/x") == origin("https://data.example:443/y")
    assert origin("http://data.example/x") == origin("http://data.example:80/x")
    assert origin("https://data.example/x") != origin("http://data.example/x")
    assert origin("https://data.example:8443/x") != origin("http://data.example:8443/x")
    assert origin("http://data.example:8080/x") != origin("http://data.example:8081/x")
    assert origin("http://a.example/x") != origin("http://b.example/x")


def _redirected(src: str, dest: str) -> urllib.request.Request:
    request = urllib.request.Request(src, headers={"Authorization": _basic("user", KEY)})
    new = _SameOriginCredentials().redirect_request(request, None, 302, "Found", {}, dest)
    assert new is not None
    return new


@pytest.mark.parametrize("dest", ["http://data.example/q.jsonl", "http://data.example:443/q.jsonl",
                                  "https://data.example:8443/q.jsonl", "https://other.example/q.jsonl"])
def test_credentials_do_not_follow_a_redirect_to_another_scheme_or_port(dest: str) -> None:
    """https -> http (on its default port or on 443 itself), or to another port: the redirected request
    carries no Authorization; to the same origin it keeps it."""
    assert not _redirected("https://data.example/q.jsonl", dest).has_header("Authorization")
    assert _redirected("https://data.example/a", "https://DATA.example:443/q.jsonl").has_header("Authorization")


def test_data_url_credentials_do_not_follow_a_redirect_to_another_port_of_the_same_host(data_home: Path) -> None:
    """Two real servers on 127.0.0.1: the first answers 302 to the second's port. The second never sees
    the Authorization the URL's `user:KEY@` gave the first."""
    with serving("127.0.0.1", serve_bytes({"/q.jsonl": TOY})) as (other, other_seen), \
            serving("127.0.0.1", redirect_to(other)) as (first, first_seen):
        assert origin(first) != origin(other) and first.rsplit(":", 1)[0] == other.rsplit(":", 1)[0]
        url = first.replace("http://", f"http://user:{KEY}@") + "/q.jsonl"
        path, _ = datastore.choose_data(url, None, None)
    assert path is not None and Path(path).read_bytes() == TOY
    assert [h.get("authorization") for h in first_seen] == [_basic("user", KEY)]
    assert other_seen and all("authorization" not in h for h in other_seen)


# ---- item 3: no run file is written through a linked folder inside a run --------------------------------

_V0 = Skill(kind="solver", version=0, text="Answer carefully.")
_V1 = Skill(kind="solver", version=1, text="Answer carefully and briefly.", parent=0, reason="shorter")
# Every way a run directory is written, each into the folder it writes: (linked folder, the write).
WRITES: dict[str, tuple[str, Callable[[Path], object]]] = {
    "skill": ("skills", lambda run: RunWriter(run).save_skill(_V1, _V0)),
    "skill of a kind": ("skills/solver", lambda run: RunWriter(run).save_skill(_V1, _V0)),
    "candidate": ("candidates", lambda run: RunWriter(run).save_candidate(_V1, "step001_rejected")),
    "gate record": ("gates", lambda run: RunWriter(run).write_json("gates/step001.json", {"accepted": True})),
    "audit record": ("audits", lambda run: RunWriter(run).write_jsonl("audits/outer_000/structural_probe.jsonl",
                                                                      [{"question_id": "q1"}])),
    "audit round": ("audits/outer_000", lambda run: RunWriter(run).write_json("audits/outer_000/verification.json",
                                                                              {})),
    "evaluation": ("eval", lambda run: RunWriter(run / "eval").write_json("test.json", {})),
    "failed grading": ("eval/failed", lambda run: RunWriter(run / "eval").write_json("failed/test.json", {})),
    "evaluation log": ("eval", lambda run: RunWriter(run / "eval").event("stopped", error="x")),
    "request journal": (".live", lambda run: RequestLog(run).sent("k1", "solver", "m", 1, 1)),
}


def _tree(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.mark.parametrize("what", sorted(WRITES))
def test_no_run_file_is_written_through_a_linked_folder(tmp_path: Path, what: str) -> None:
    """`RUN/<folder> -> elsewhere`: the write is refused (UnsafeRunPath) and nothing appears elsewhere, not
    even a folder (before the fix, `mkdir -p` made `elsewhere/solver/` before the link was noticed)."""
    linked, write = WRITES[what]
    run, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (run / linked).parent.mkdir(parents=True, exist_ok=True)
    (run / linked).symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(UnsafeRunPath):
        write(run)
    assert _tree(elsewhere) == []


def test_a_sweep_cell_log_is_not_appended_through_a_link(tmp_path: Path) -> None:
    """SWEEP/runs/B/CELL/sweep.log linked to a file elsewhere: the cell fails naming it, the file is
    untouched (before the fix the cell's banner was appended to it)."""
    from decoevo.sweep.cell import LOG_FILE, CellRequest, execute_cell

    run, target = tmp_path / "cell", tmp_path / "precious.txt"
    run.mkdir()
    target.write_text("mine\n")
    (run / LOG_FILE).symlink_to(target)
    outcome = execute_cell(CellRequest(cell_id="b/c", run_dir=str(run), config={}, threads=1))
    assert not outcome.ok and LOG_FILE in (outcome.error or "") and "symbolic link" in (outcome.error or "")
    assert target.read_text() == "mine\n"


def test_export_refuses_to_write_through_a_link(tmp_path: Path, finished_run: Path) -> None:
    target = tmp_path / "precious.md"
    target.write_text("mine\n")
    link = tmp_path / "skill.md"
    link.symlink_to(target)
    code, output = invoke(["export", finished_run, "-o", link])
    assert code == 2 and output.count("error:") == 1 and "symbolic link" in " ".join(output.split()), output
    assert target.read_text() == "mine\n"
    code, output = invoke(["export", finished_run, "-o", tmp_path / "plain.md"])  # a plain file: written
    assert code == 0 and (tmp_path / "plain.md").read_text().strip(), output


# ---- item 5: resume classifies every configuration key --------------------------------------------------

# The keys docs/configuration.md names as result-neutral (a resume may change them): a model's...
NEUTRAL_MODEL_KEYS = ("max_concurrency", "n_threads", "timeout_s", "connect_timeout_s", "first_byte_timeout_s",
                      "min_tokens_per_s", "timeout_retries", "max_retries", "backoff_base_s", "backoff_cap_s",
                      "requests_per_minute", "tokens_per_minute", "base_url", "api_key_env", "api_key_file")
# ...and these of the run (tracking is no key of a run's config.yaml: it is the --track flag)
NEUTRAL_RUN_KEYS = ("hyper.concurrency", "data.path")


def _default_config() -> Any:
    from decoevo.engine.config import config_from_dict

    # two models, so `lm.models.NAME` is walked for a name other than the default too
    return config_from_dict({"data": {"path": "q.jsonl"}, "lm": {"models": {"default": {}, "judge": {
        "backend": "openai", "model": "judge-model", "base_url": "http://127.0.0.1:8000/v1"}},
        "roles": {"judge": "judge"}}})


def test_every_leaf_of_a_default_config_is_classified_as_documented() -> None:
    """Walk every leaf key of a default RunConfig: exactly the documented keys are result-neutral (making
    `hyper.epsilon` or a model's `model` neutral fails here), and every other key, changed alone, is named
    as a result-changing edit."""
    from decoevo.engine.resume_config import leaves, result_changes, result_neutral

    recorded = _default_config().model_dump(mode="json")
    keys = leaves(recorded)
    models = recorded["lm"]["models"]
    assert set(models) == {"default", "judge"} and len(keys) > 60
    documented = {*NEUTRAL_RUN_KEYS, *(f"lm.models.{m}.{k}" for m in models for k in NEUTRAL_MODEL_KEYS)}
    assert documented <= keys.keys()  # a renamed field fails here, not silently
    assert {k for k in keys if result_neutral(k)} == documented
    for key in keys:
        parts = key.split(".")
        changed = json.loads(json.dumps(recorded))
        node = changed
        for part in parts[:-1]:
            node = node[part]
        node[parts[-1]] = ["changed", node[parts[-1]]]
        named = result_changes(recorded, changed)
        if key in documented:
            assert named == [], key
        else:
            assert len(named) == 1 and named[0].startswith(f"{key} ("), (key, named)


def test_the_configuration_page_names_every_neutral_key() -> None:
    page = (Path(__file__).resolve().parents[1] / "docs" / "configuration.md").read_text(encoding="utf-8")
    paragraph = page[page.index("`decoevo resume RUN` continues"):][:1500]
    for key in (*NEUTRAL_MODEL_KEYS, *NEUTRAL_RUN_KEYS):
        assert f"`{key}`" in paragraph, key


# ---- item 6: a checkpoint copied from another run is refused --------------------------------------------

@pytest.fixture(scope="module")
def stopped_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, int]:
    """Two runs of the same configuration, seeds 3 and 4, each stopped by 503s after a checkpoint."""
    from decoevo.testing.fake_openai import FakeOpenAI, Reply
    from decoevo.testing.server import free_port, serve_app
    from decoevo.testing.toy_server import toy_reply, toy_run_args, write_toy_questions

    pytest.importorskip("uvicorn")
    root = tmp_path_factory.mktemp("stopped")
    data = write_toy_questions(root / "toy.jsonl")
    port = free_port()
    for seed in (3, 4):
        server = FakeOpenAI(lambda body, n: toy_reply(body, n) if n < 80 else Reply(status=503))
        with serve_app(server.app(), port=port) as url:
            code, output = invoke([*toy_run_args(f"{url}/v1", data, root, f"r_s{seed}", steps=3, seed=seed,
                                                 sets=("lm.models.default.max_retries=0",)), "--no-cache"])
        assert code == 2, output
        assert json.loads((root / f"r_s{seed}" / "checkpoint.json").read_text())["state"]["next_step"] >= 1
    return root, port


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))


def _resume(root: Path, port: int, name: str) -> tuple[int, str]:
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_server

    with serve_app(toy_server().app(), port=port):
        return invoke(["resume", root / name])


def test_a_checkpoint_copied_from_another_seed_is_refused(tmp_path: Path, stopped_runs: tuple[Path, int]) -> None:
    """`cp RUN_s4/checkpoint.json RUN_s3/; decoevo resume RUN_s3`: one line, exit 2, nothing changed (before
    the fix it finished seed 3 with seed 4's state, exit 0)."""
    original, port = stopped_runs
    for name in ("r_s3", "r_s4"):
        shutil.copytree(original / name, tmp_path / name)
    shutil.copy(original / "toy.jsonl", tmp_path / "toy.jsonl")
    for name in ("r_s3", "r_s4"):
        config = tmp_path / name / "config.yaml"
        config.write_text(config.read_text().replace(str(original), str(tmp_path)))
    shutil.copy(tmp_path / "r_s4" / "checkpoint.json", tmp_path / "r_s3" / "checkpoint.json")
    before = {p.name: p.read_bytes() for p in (tmp_path / "r_s3").iterdir() if p.is_file()}
    code, output = _resume(tmp_path, port, "r_s3")
    assert code == 2 and output.count("error:") == 1 and "Traceback" not in output, output  # one message
    flat = " ".join(output.split())
    assert "checkpoint.json belongs to another run" in flat and "seed 4 (this run's: 3)" in flat, flat
    assert {p.name: p.read_bytes() for p in (tmp_path / "r_s3").iterdir() if p.is_file()} == before
    assert not (tmp_path / "r_s3" / "summary.json").exists()
    code, output = _resume(tmp_path, port, "r_s4")  # the run the checkpoint belongs to resumes
    assert code == 0, output


def test_a_checkpoint_of_another_run_with_the_same_seed_is_refused_by_its_run_id(
        tmp_path: Path, stopped_runs: tuple[Path, int]) -> None:
    """Same method, same seed, another run (the start event's run id): refused as well."""
    from decoevo.rundir import RunReader

    original, port = stopped_runs
    shutil.copytree(original / "r_s3", tmp_path / "r_s3")
    shutil.copy(original / "toy.jsonl", tmp_path / "toy.jsonl")
    config = tmp_path / "r_s3" / "config.yaml"
    config.write_text(config.read_text().replace(str(original), str(tmp_path)))
    checkpoint = json.loads((tmp_path / "r_s3" / "checkpoint.json").read_text())
    start = RunReader(tmp_path / "r_s3").events(problems=[])[0]
    assert checkpoint["run_id"] == start.run_id and len(start.run_id or "") >= 12  # every checkpoint says whose
    checkpoint["run_id"] = "0123456789ab"
    (tmp_path / "r_s3" / "checkpoint.json").write_text(json.dumps(checkpoint))
    code, output = _resume(tmp_path, port, "r_s3")
    assert code == 2 and "run_id '0123456789ab'" in " ".join(output.split()), output


# ---- item 4: the report escapes every model-written string -----------------------------------------------

def _planted_copy(run: Path, dest: Path) -> Path:
    """`run` copied, with markup planted in each model-written string the report shows: a skill's text and
    reason, a skill diff, a rejected candidate (its diff is made by the report), a judge's and auditor's
    rationale, a gate's reason and note, an incident; the questions carry it from the start."""
    shutil.copytree(run, dest)

    def append(rel: str, text: str) -> None:
        path = dest / rel
        path.write_text(path.read_text(encoding="utf-8").rstrip("\n") + text + "\n", encoding="utf-8")

    skill = dest / "skills/solver/v001.md"
    skill.write_text(skill.read_text().replace("<!-- reason: ", f"<!-- reason: {plant('reason')} ", 1))
    append("skills/solver/v001.md", f"\n{plant('skill')}")
    append("skills/solver/v001.diff", f"\n+{plant('diff')}")
    append("candidates/generator_round000_rejected.md", f"\n{plant('candidate')}")
    for rel, fields in (("audits/outer_000/structural_probe.jsonl", ("rationale", "repair")),
                        ("audits/outer_000/contrastive_probe.jsonl", ("rationale", "principle", "missed"))):
        records = [json.loads(line) for line in (dest / rel).read_text().splitlines()]
        for r in records:
            r.update({f: f"{r[f]} {plant('judge')}" for f in fields})
        (dest / rel).write_text("".join(json.dumps(r) + "\n" for r in records))
    verification = json.loads((dest / "audits/outer_000/verification.json").read_text())
    verification["decision"]["reason"] += plant("judge")
    (dest / "audits/outer_000/verification.json").write_text(json.dumps(verification))
    events = [json.loads(line) for line in (dest / "events.jsonl").read_text().splitlines()]
    for e in events:
        if e["event"] == "inner_step":
            e["note"] = plant("note")
        elif e["event"] == "outer_round":
            e["reason"] += plant("gate")
        elif e["event"] == "invalid_candidate":
            e["reason"] += plant("incident")
    (dest / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    return dest


class _Page(HTMLParser):
    """The elements of a page and its text, as a browser's parser sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.elements.append((tag, dict(attrs)))

    handle_startendtag = handle_starttag

    def handle_data(self, data: str) -> None:
        self.text.append(data)


PLANTED = ("question", "skill", "reason", "diff", "candidate", "judge", "gate", "note", "incident")


def test_the_report_escapes_every_model_written_string(tmp_path: Path, finished_run: Path) -> None:
    """Each planted string is on the page as text, and not one planted tag is live: no script element,
    no img, no `on...` handler anywhere (before the fix of a diff filter without escaping, or a `|safe`
    on a skill's text, the planted ones appear as elements)."""
    from decoevo.report import build_report, render

    run = _planted_copy(finished_run, tmp_path / "run")
    html = render(build_report([run]))
    page = _Page()
    page.feed(html)
    page.close()
    text = "".join(page.text)
    for where in PLANTED:
        assert plant(where) in text, f"the planted {where} is not on the page: the test would not notice"
    scripts = [tag for tag, _ in page.elements if tag == "script"]
    images = [tag for tag, _ in page.elements if tag == "img"]
    handlers = [(tag, name) for tag, attrs in page.elements for name in attrs if name.startswith("on")]
    assert (scripts, images, handlers) == ([], [], [])


# ---- item 12: the toy server's flags ---------------------------------------------------------------------

@pytest.mark.parametrize("args, words", [
    (["--port", "99999"], "--port 99999"),
    (["--port", "-1"], "--port -1"),
    (["--delay", "nan"], "--delay nan"),
    (["--write-questions", "{tmp}"], "is a directory"),
    (["--write-questions", "{tmp}/missing/q.jsonl"], "cannot write it"),
])
def test_the_toy_server_refuses_a_bad_flag_in_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    done = subprocess.run([sys.executable, "-m", "decoevo.testing.toy_server", *args], capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert done.stderr.startswith("error: ") and words in done.stderr


@pytest.mark.parametrize("body", ["{}", "[]", '{"messages": "hi"}', '{"messages": [{"role": "user"}]}',
                                  '{"messages": [{"role": "user", "content": "hi"}], "response_format": "json"}'])
def test_the_toy_server_answers_a_malformed_request_400_in_one_line(tmp_path: Path, body: str) -> None:
    """A request body `{}` was a 500 and a KeyError traceback in the server's log: the client's mistake is a
    400 whose one-line message says what the request lacks, and the log stays clean."""
    from decoevo.testing.server import free_port

    port = free_port()
    log = tmp_path / "server.log"
    with log.open("w") as out:
        server = subprocess.Popen([sys.executable, "-m", "decoevo.testing.toy_server", "--port", str(port)],
                                  stdout=out, stderr=subprocess.STDOUT)
    try:
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=body.encode(),
                                         headers={"content-type": "application/json"}, method="POST")
        for _ in range(600):  # wait until it listens (no timed assert: up to a minute on a loaded machine)
            try:
                urllib.request.urlopen(request, timeout=30)
                status, answer = 200, ""
                break
            except urllib.error.HTTPError as exc:
                status, answer = exc.code, exc.read().decode()
                break
            except urllib.error.URLError:
                assert server.poll() is None, log.read_text()
                time.sleep(0.1)
        else:
            pytest.fail(f"the toy server never answered: {log.read_text()}")
        ok = urllib.request.urlopen(urllib.request.Request(
            f"http://127.0.0.1:{port}/v1/chat/completions", method="POST", headers={"content-type": "application/json"},
            data=b'{"model": "toy", "messages": [{"role": "user", "content": "hi"}]}'), timeout=30)
        assert ok.status == 200  # a well-formed request after it is still answered
    finally:
        server.terminate()
        server.wait(timeout=60)
    message = json.loads(answer)["error"]["message"]
    assert status == 400 and "\n" not in message and message, answer
    assert "Traceback" not in log.read_text() and "Error" not in log.read_text(), log.read_text()


# ---- item 13: messages that named the wrong thing --------------------------------------------------------

@pytest.mark.parametrize("key", ["", ".", " ", ".."])
def test_config_with_an_empty_key_is_an_error_not_a_section(key: str) -> None:
    code, output = invoke(["config", key])
    assert code == 2 and "no configuration key" in output and "top level" not in output, output
    assert len(output.strip().splitlines()) <= 2, output  # one message, wrapped to the terminal at most once


def test_a_huge_key_is_not_echoed_whole() -> None:
    key = "k" * 100_000
    code, output = invoke(["config", key])
    assert code == 2 and "no configuration key" in output and "more characters" in output, output[:300]
    assert len(output) < 2_000


@pytest.mark.parametrize("flags, words", [
    (["--tables", "9"], "--tables: unknown 9"),
    (["--tables", "2", "--benchmarks", "writingbench"], "tables 2 are on HealthBench"),
    (["--benchmarks", "nosuch"], "--benchmarks: nosuch"),
])
def test_reproduce_blames_the_flag_not_a_state_file_not_yet_written(tmp_path: Path, flags: list[str],
                                                                      words: str) -> None:
    out = tmp_path / "experiment"
    code, output = invoke(["reproduce", out, "--model", "m", "--base-url", "http://127.0.0.1:9/v1", "--plan-only",
                           *flags])
    flat = " ".join(output.split())
    assert code == 2 and words in flat and "reproduce.yaml" not in flat, flat
    assert not out.exists() or not any(out.iterdir())


def test_a_link_to_a_folder_as_the_run_name_is_called_a_link(tmp_path: Path) -> None:
    from decoevo.testing.toy_server import write_toy_questions

    data = write_toy_questions(tmp_path / "toy.jsonl")
    folder, runs = tmp_path / "elsewhere", tmp_path / "runs"
    folder.mkdir()
    runs.mkdir()
    (runs / "r").symlink_to(folder, target_is_directory=True)
    code, output = invoke(["run", "--runs-root", runs, "--name", "r", "--data", data, "--task", "healthbench",
                           "--base-url", "http://127.0.0.1:9/v1", "--model", "toy"])
    flat = " ".join(output.split())
    assert code == 2 and "is a symbolic link" in flat and "not a directory" not in flat, flat
    assert list(folder.iterdir()) == []


def test_a_tampered_copy_of_a_data_url_is_said_to_have_changed(data_home: Path) -> None:
    """The copy kept of `--data URL` edited on disk, and the URL unreachable: the message says the copy
    changed (why a download was needed), not only that the host cannot be reached."""
    from decoevo.errors import ConfigError

    with serving("127.0.0.1", serve_bytes({"/q.jsonl": TOY})) as (base, _):
        url = base + "/q.jsonl"
        path, _ = datastore.choose_data(url, None, None)
    assert path is not None
    Path(path).write_bytes(TOY + b'{"id": "q3", "prompt": "planted"}\n')
    with pytest.raises(ConfigError) as caught:
        datastore.choose_data(url, None, None)
    message = str(caught.value)
    assert "changed since" in message and str(path) in message and "cannot be downloaded" in message, message


def test_ctrl_c_while_a_report_is_built_says_nothing_of_paid_answers(monkeypatch: pytest.MonkeyPatch,
                                                                    finished_run: Path) -> None:
    """SIGINT while `report --watch` builds its first page (and while `report` builds one): a report
    calls no model, so the message must not say answers were paid for."""
    import decoevo.report as report_pkg
    from decoevo.report import serve

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(serve.ReportServer, "__init__", interrupted)
    code, output = invoke(["report", finished_run, "--watch", "--port", "0"])
    assert code == 130 and "interrupted" in output and "paid" not in output, output
    monkeypatch.setattr(report_pkg, "build_report", interrupted)
    code, output = invoke(["report", finished_run, "-o", finished_run.parent / "r.html"])
    assert code == 130 and "interrupted" in output and "paid" not in output, output


# ---- a finished toy run (export, the report) -------------------------------------------------------------

def plant(where: str) -> str:
    """Markup a model could write: live, it would run a script and load an image with a handler."""
    return f"<script>plant_{where}()</script><img src=x onerror=plant_{where}()>"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A DecoEvo run on the toy world whose questions carry planted markup (they reach the transcripts)."""
    from unittest import mock

    from decoevo.domain import Question, QuestionView
    from decoevo.engine.run import Engine
    from decoevo.lm import LM, LMConfig, RequestCache
    from decoevo.testing.scripted import toy_world_backend

    from .engine_helpers import toy_config, toy_questions

    root = tmp_path_factory.mktemp("finished")
    questions = [Question(**QuestionView.from_text(q.id, f"{q.as_text()} {plant('question')}", task=q.task)
                          .model_dump()) for q in toy_questions()]
    lm = LM(LMConfig(), backends={"default": toy_world_backend()}, cache=RequestCache(root / "cache.sqlite"))
    with mock.patch("decoevo.rundir.files.os.fsync"):  # durability is tested elsewhere; here it is only time
        asyncio.run(Engine(toy_config("decoevo"), root / "run", lm=lm, questions=questions).run_async())
    assert (root / "run" / "summary.json").is_file()
    return root / "run"


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_max_cost_help_and_check_agree(command: str) -> None:
    """The help said `[x>=0.0]` while 0 was refused by the configuration: now both say more than 0."""
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert "x>=0" not in result.output and "more than 0" in " ".join(result.output.split()), result.output
    for bad in ("0", "-1", "nan"):
        code, output = invoke([command, "--max-cost", bad, "--data", "missing.jsonl"])
        flat = " ".join(re.sub("[│╭╮╰╯─]", " ", output).split())  # the usage error's box
        assert code == 2 and "--max-cost" in flat and "more than 0" in flat, flat


@pytest.mark.slow  # a run's start against a real server; test_a_huge_key_is_not_echoed_whole keeps the rule
def test_a_huge_model_name_is_not_echoed_whole(tmp_path: Path) -> None:
    """A 50 KB --model against a real server that does not list it: the refusal quotes the start of it."""
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_server, write_toy_questions

    pytest.importorskip("uvicorn")
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(toy_server().app()) as url:
        code, output = invoke(["run", "--data", data, "--task", "healthbench", "--preset", "quick", "--base-url",
                               f"{url}/v1", "--model", "m" * 50_000, "--runs-root", tmp_path / "runs"])
    flat = " ".join(output.split())
    assert code == 2 and "does not serve it" in flat and "more characters" in flat, flat[:500]
    assert len(output) < 2_000


def test_the_command_line_quiets_matplotlibs_own_notes() -> None:
    """What the slow test below checks end to end: any command leaves matplotlib's logger at ERROR (its notes
    about its own cache are not the user's business), unless the user set its level."""
    plots_log = logging.getLogger("matplotlib")
    before = plots_log.level
    try:
        plots_log.setLevel(logging.NOTSET)
        invoke(["config", "hyper.steps"])
        assert plots_log.level == logging.ERROR
        plots_log.setLevel(logging.INFO)  # the user's own choice stays
        invoke(["config", "hyper.steps"])
        assert plots_log.level == logging.INFO
    finally:
        plots_log.setLevel(before)


@pytest.mark.slow  # a report in a fresh process (matplotlib's import); the test above keeps the rule
def test_no_matplotlib_note_leads_the_report_stderr(tmp_path: Path, finished_run: Path) -> None:
    """HOME unusable (a file): matplotlib cannot make its config folder and logs a warning at import, which
    led `decoevo report`'s stderr; the report is written and stderr holds no word of matplotlib."""
    home = tmp_path / "home-is-a-file"
    home.write_text("")
    env = {k: v for k, v in os.environ.items() if k not in ("MPLCONFIGDIR", "XDG_CONFIG_HOME", "XDG_CACHE_HOME")}
    done = subprocess.run([sys.executable, "-m", "decoevo", "report", str(finished_run), "-o",
                           str(tmp_path / "r.html")], capture_output=True, text=True, timeout=300, check=False,
                          env={**env, "HOME": str(home)})
    assert done.returncode == 0 and (tmp_path / "r.html").is_file(), done.stderr
    assert "matplotlib" not in done.stderr.lower(), done.stderr
