"""Issue 47.1, round seven: the per-call work a run does is done by C code where Python did it, and what
it protects stays protected.

- a reply body's secret check is one C-encoded text scanned once, not a Python walk of its strings; a
  secret JSON would escape (a quote, a backslash, a control character) still takes the walk and is masked;
- the run directory's indented files (checkpoint, ledger, gate records) are written by the C encoder, not
  json's pure-Python one, and read back as the same value."""

from __future__ import annotations

import json
import secrets
from pathlib import Path

import pytest

from decoevo import redact
from decoevo.redact import MASK, PARTIAL, mask_tree, register_secret
from decoevo.rundir import files
from decoevo.rundir.files import dumps_indented
from decoevo.rundir.writer import RunWriter


def _fresh(n: int) -> str:
    return secrets.token_hex(n)[:n]


def test_a_reply_body_is_checked_for_secrets_without_walking_its_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    # the process's registry as a user's run has it: other tests register hostile secrets (a quote, a
    # backslash) that rightly send every body down the walk
    monkeypatch.setattr(redact, "_known", ())
    key = _fresh(32)
    register_secret(key)

    def walked(*_: object) -> None:
        raise AssertionError("the body's strings were walked one by one")

    body = {"id": "c1", "choices": [{"message": {"role": "assistant", "content": "a plain answer"}}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4}}
    with monkeypatch.context() as patched:
        patched.setattr(redact, "_strings", walked)
        patched.setattr(redact, "_mask_tree", walked)  # nor masked string by string: nothing there to mask
        assert mask_tree(body) is body  # nothing to mask: the very object, found by one scan
    leaked = {"choices": [{"message": {"content": f"the key is {key}"}}], key[:PARTIAL + 3]: 1}
    masked = mask_tree(leaked)
    assert masked == {"choices": [{"message": {"content": f"the key is {MASK}"}}], MASK: 1}


@pytest.mark.parametrize("odd", ['"', "\\", "\n", "\x01"])
def test_a_secret_json_would_escape_is_still_masked_in_a_reply_body(odd: str) -> None:
    """JSON writes `"`, `\\` and control characters escaped, so such a secret never appears in the encoded
    body as it is: its check walks the strings instead, and every copy is masked."""
    key = f"{_fresh(6)}{odd}{_fresh(20)}"
    register_secret(key)
    body = {"choices": [{"message": {"content": f"echo {key} end"}}], "deep": [[{"x": f"{key[:PARTIAL + 1]}"}]]}
    masked = mask_tree(body)
    assert masked["choices"][0]["message"]["content"] == f"echo {MASK} end"
    assert masked["deep"] == [[{"x": MASK}]]
    assert key not in json.dumps(masked)


def test_a_value_that_is_not_json_is_still_masked() -> None:
    key = _fresh(30)
    register_secret(key)
    body = {"a": [f"x {key}", object()], "b": {1: key}}  # an object the encoder refuses: the walk
    masked = mask_tree(body)
    assert masked["a"][0] == f"x {MASK}" and masked["b"] == {1: MASK}


def test_indented_run_files_use_no_pure_python_encoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """json.dumps(indent=2) runs json's pure-Python encoder, which a checkpoint of thousands of scores made a
    visible share of a run's CPU; the writer's indented files are C-encoded and read back as the same value."""
    import json.encoder

    def slow(*_: object, **__: object) -> None:
        raise AssertionError("the pure-Python JSON encoder was used")

    state = {"scores": {f"q{i}": [i / 7, None, True, "é\"\\"] for i in range(50)}, "empty": {}, "none": [],
             "nested": {"a": {"b": {"c": [1, {"d": 2}]}}}, "odd": float("inf")}
    monkeypatch.setattr(json.encoder, "_make_iterencode", slow)
    writer = RunWriter(tmp_path / "run")
    writer.write_json("state.json", state)
    text = (tmp_path / "run" / "state.json").read_text(encoding="utf-8")
    monkeypatch.undo()
    assert json.loads(text) == state
    assert text.startswith('{\n  "scores": {\n    "q0": [0.0, null, true, "é\\"\\\\"],')  # two levels laid out
    assert text.endswith("\n}\n")


def test_indented_text_is_json_dumps_indent_2_to_the_depth_it_lays_out() -> None:
    value = {"a": [1, {"b": [2, 3], "c": {}}, []], "d": "x\ud800", "e": {"f": None}, "g": ()}
    assert dumps_indented(value, depth=99) == json.dumps(value, indent=2, ensure_ascii=False, default=str)
    assert json.loads(dumps_indented(value).encode("utf-8", "surrogatepass")) == json.loads(
        json.dumps(value, indent=2, ensure_ascii=False).encode("utf-8", "surrogatepass"))


def test_a_log_line_under_a_linked_folder_is_still_refused(tmp_path: Path) -> None:
    """The folder check of an appended line now compares strings: a file below the run directory's own
    folder (RUN/eval/...) is still checked for a link on its way, and one directly in it is not walked."""
    root = tmp_path / "run"
    root.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "eval").symlink_to(elsewhere)
    with pytest.raises(files.UnsafeRunPath):
        files.append_line(root, root / "eval" / "calls.jsonl", "{}")
    assert not (elsewhere / "calls.jsonl").exists()
    files.append_line(root, root / "calls.jsonl", "{}")
    assert (root / "calls.jsonl").read_text() == "{}\n"


async def test_a_call_without_a_cost_cap_does_not_compute_its_worst_case(make_lm, monkeypatch: pytest.MonkeyPatch
                                                                        ) -> None:
    """The worst-case bill of a request (every message's UTF-8 bytes, the schema's JSON) is read only under
    `budget.max_cost` or an experiment's spend file: without either it is not computed on every call."""
    from decoevo.lm import client
    from decoevo.lm.types import Message

    def bound(*_: object) -> None:
        raise AssertionError("request_bound computed with no cap to read it")

    monkeypatch.setattr(client, "request_bound", bound)
    monkeypatch.delenv("DECOEVO_SPEND_FILE", raising=False)
    lm, backend = make_lm(lambda r: "hello")
    result = await lm.complete([Message("user", "hi")], role="solve")
    assert result.text == "hello" and len(backend.calls) == 1


def test_a_cli_run_tunes_the_garbage_collector_before_its_calls(monkeypatch: pytest.MonkeyPatch) -> None:
    """`decoevo run` and `resume` freeze what start-up made and collect the young generation every GC_YOUNG
    allocations (Python's default, 700, collected ~400 times in a 2,400-call run, and each full collection
    walked every module and schema)."""
    import gc

    from decoevo.cli import run as cli_run

    seen: list[tuple[int, int]] = []
    monkeypatch.setattr(cli_run, "fit_to_servers", lambda lm, say: lm)

    def fake_run(*_: object, **__: object) -> None:
        seen.append((gc.get_threshold()[0], gc.get_freeze_count()))

    monkeypatch.setattr("decoevo.cli.run_progress.run_with_progress", fake_run)
    before = gc.get_threshold()

    class Config:
        lm = None

        def model_copy(self, update: dict[str, object]) -> Config:
            return self

    frozen = gc.get_freeze_count()
    try:
        cli_run._execute(Config(), Path("unused"), resume=False)
        # and put back after: a process calling the command in-process (a test, a notebook) keeps its own
        assert gc.get_threshold() == before and gc.get_freeze_count() == frozen
    finally:
        gc.set_threshold(*before)
    assert seen and seen[0][0] == cli_run.GC_YOUNG and seen[0][1] > 0


# ---- what the writer must keep while its paths and encoders changed (the mutation bench's writer.py survivors)
def test_the_writer_fsyncs_events_not_call_lines_and_checkpoints_after_syncing_both_logs(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An event is fsynced (few, and a resume cuts the log back to them); a call line is not (one per answered
    request, ~2 ms each) and is flushed at the next checkpoint, with the request log, before the checkpoint
    that counts it is written."""
    from decoevo.rundir import writer as writer_module
    from decoevo.rundir.records import CALLS, CHECKPOINT, REQUESTS, CallLine

    fsynced: list[int] = []
    real_fsync = files.os.fsync
    monkeypatch.setattr(files.os, "fsync", lambda fd: (fsynced.append(fd), real_fsync(fd))[1])
    run = RunWriter(tmp_path / "run")
    run.event("start", method="decoevo", seed=0, run_id="r1")
    run.event("start", method="decoevo", seed=0, run_id="r1")  # a second event into the same folder
    assert len(fsynced) == 2 and len((tmp_path / "run" / "events.jsonl").read_text().splitlines()) == 2
    run.record_call(CallLine(role="solve", model="m", key="k", cached=False, prompt_tokens=1, completion_tokens=1))
    assert len(fsynced) == 2  # not fsynced: flushed at the checkpoint
    RunWriter(tmp_path / "runs" / "new" / "run").event("start", method="decoevo", seed=0, run_id="r2")
    assert (tmp_path / "runs" / "new" / "run" / "events.jsonl").is_file()  # its folders made as needed
    order: list[str] = []
    real_sync = writer_module.sync
    monkeypatch.setattr(writer_module, "sync", lambda root, path: (order.append(path.name), real_sync(root, path)))
    real_write = writer_module.RunWriter.write_model
    monkeypatch.setattr(writer_module.RunWriter, "write_model",
                        lambda self, rel, record: (order.append(rel), real_write(self, rel, record)))
    run.checkpoint({"next_step": 1}, {"rows": []})
    assert order.index(CALLS) < order.index(CHECKPOINT) and REQUESTS in order[:order.index(CHECKPOINT)]


def test_a_skill_with_a_parent_is_saved_with_its_diff(tmp_path: Path) -> None:
    from decoevo.domain import Skill

    run = RunWriter(tmp_path / "run")
    old = Skill(kind="solver", version=0, text="Be brief.")
    new = Skill(kind="solver", version=1, text="Be brief.\nCite sources.", parent=0, reason="accepted")
    run.save_skill(old, None)
    run.save_skill(new, old)
    skills = tmp_path / "run" / "skills" / "solver"
    assert not (skills / "v000.diff").exists()
    diff = (skills / "v001.diff").read_text(encoding="utf-8")
    assert diff.startswith("--- v000\n+++ v001") and "+Cite sources." in diff


def test_a_header_secret_of_exactly_the_minimum_length_is_masked_in_a_backends_messages() -> None:
    """The Redactor of a request keeps every credential header's value of MIN_SECRET characters or more (the
    mutation bench's backend_secrets.py boundary survivor): one of exactly that length is masked too."""
    from decoevo.lm.backend_secrets import Redactor
    from decoevo.redact import MIN_SECRET

    value = _fresh(MIN_SECRET)  # registered nowhere else: only the Redactor knows it
    redactor = Redactor.for_request({"X-Custom-Key": "x", "api-key": value})
    assert value in redactor.secrets
    assert redactor.text(f"server said: {value} is wrong") == f"server said: {MASK} is wrong"
    assert redactor.body({"echo": value}) == {"echo": MASK}


async def test_a_model_that_shares_no_slots_is_called_without_one(make_lm, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """In a sweep (DECOEVO_SHARED_SLOTS set) an embedded model is the process's own: it takes no shared slot
    (its pool is None) and is called directly (the mutation bench's lm/client.py survivor at `pool is None`)."""
    from decoevo.lm.shared_slots import ENV
    from decoevo.lm.types import Message

    monkeypatch.setenv(ENV, str(tmp_path / "slots"))
    lm, backend = make_lm(lambda r: "hello")  # its "default" model is the embedded (local) one
    assert lm._shared is not None
    result = await lm.complete([Message("user", "hi")], role="solve")
    assert result.text == "hello" and len(backend.calls) == 1 and lm._slot_pools == {"default": None}
    await lm.aclose()


# ---- the request cache, whose key encoder changed (the mutation bench's lm/cache.py survivors)
def test_the_cache_path_comes_from_decoevo_cache_when_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from decoevo.lm.cache import default_cache_path

    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "mine.sqlite"))
    assert default_cache_path() == tmp_path / "mine.sqlite"
    monkeypatch.delenv("DECOEVO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "decoevo" / "requests.sqlite"


def test_a_lease_taken_over_from_an_expired_holder_is_not_taken_again_while_it_lives(tmp_path: Path) -> None:
    """Nothing is paid twice: a handle that takes over a stale lease holds it for its own ttl, so a third
    handle sharing the cache waits instead of paying the same request too."""
    from decoevo.lm.cache import RequestCache

    first, second, third = (RequestCache(tmp_path / "cache.sqlite") for _ in range(3))
    assert first.claim("k", -1.0)  # a lease that has already expired (its holder hung)
    assert second.claim("k", 900.0)  # taken over
    assert not third.claim("k", 900.0) and third.held_elsewhere("k")
    for cache in (first, second, third):
        cache.close()


def test_closing_the_cache_closes_its_connection(tmp_path: Path) -> None:
    from decoevo.lm.cache import RequestCache

    cache = RequestCache(tmp_path / "cache.sqlite")
    conn = cache._conn()
    cache.close()
    assert getattr(cache._local, "conn", None) is None
    with pytest.raises(Exception, match="closed"):
        conn.execute("SELECT 1")
