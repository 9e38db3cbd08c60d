"""`decoevo resume` continues the recorded run or refuses (issue 12 item 8): an edited method or seed is
never continued; a data file whose sha256 changed, or splits that now come out differently, are refused
with the difference named unless --accept-changed-data; a run recorded before inputs.json existed resumes.
Also issue 11 item 3: --model/--base-url merge with a --config file instead of replacing its models."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import free_port, serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, toy_server, write_toy_questions

pytest.importorskip("uvicorn")
runner = CliRunner()


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))


def invoke(args) -> tuple[int, str]:
    result = runner.invoke(app, [str(a) for a in args])
    return result.exit_code, " ".join(result.output.split())


@pytest.fixture(scope="module")
def stopped_run(tmp_path_factory) -> tuple[Path, int]:
    """A run stopped by 503s after its first step (a checkpoint, not finished) and the port it used."""
    root = tmp_path_factory.mktemp("stopped")
    data = write_toy_questions(root / "toy.jsonl")
    port = free_port()
    server = FakeOpenAI(lambda body, n: toy_reply(body, n) if n < 80 else Reply(status=503))  # about half the run
    with serve_app(server.app(), port=port) as url:
        code, output = invoke([*toy_run_args(f"{url}/v1", data, root, "r", steps=3,
                                             sets=("lm.models.default.max_retries=0",)), "--no-cache"])
    assert code == 2, output
    run = root / "r"
    assert json.loads((run / "checkpoint.json").read_text())["state"]["next_step"] >= 1
    return run, port


@pytest.fixture
def run(tmp_path, stopped_run) -> tuple[Path, int]:
    original, port = stopped_run
    copy = tmp_path / "r"
    shutil.copytree(original, copy)
    shutil.copy(original.parent / "toy.jsonl", tmp_path / "toy.jsonl")
    config = copy / "config.yaml"
    config.write_text(config.read_text().replace(str(original.parent), str(tmp_path)))
    return copy, port


def edit_config(run_dir: Path, old: str, new: str) -> None:
    path = run_dir / "config.yaml"
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))


def test_inputs_are_recorded_at_start(run):
    run_dir, _ = run
    inputs = json.loads((run_dir / "inputs.json").read_text())
    assert len(inputs["data_sha256"]) == 64 and inputs["data_path"].endswith("toy.jsonl")


@pytest.mark.parametrize("old,new,fragment", [("seed: 3", "seed: 4", "seed is 4 in config.yaml, but the run started "
                                                                     "with seed 3"),
                                              ("method: decoevo", "method: skillopt", "method is 'skillopt'")])
def test_edited_seed_or_method_is_refused_even_when_accepting_data(run, old, new, fragment):
    run_dir, _ = run
    edit_config(run_dir, old, new)
    before = (run_dir / "events.jsonl").read_bytes()
    for extra in ([], ["--accept-changed-data"]):
        code, output = invoke(["resume", run_dir, *extra])
        assert code == 2 and fragment in output and "Traceback" not in output, output
    assert (run_dir / "events.jsonl").read_bytes() == before


def test_changed_data_is_refused_then_accepted_explicitly(run):
    run_dir, port = run
    data = run_dir.parent / "toy.jsonl"
    lines = data.read_text().splitlines(True)
    data.write_text("".join(lines[:-1]))  # one question fewer: another sha256 and other splits
    splits_before = (run_dir / "splits.json").read_text()
    code, output = invoke(["resume", run_dir])
    assert code == 2 and f"the data {data} changed since the run started" in output, output
    assert "the splits made now differ from splits.json" in output and "--accept-changed-data" in output
    assert (run_dir / "splits.json").read_text() == splits_before
    with serve_app(toy_server().app(), port=port):
        code, output = invoke(["resume", run_dir, "--accept-changed-data"])
    assert code == 0, output
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    recorded = json.loads((run_dir / "inputs.json").read_text())["data_sha256"]
    import hashlib
    assert recorded == hashlib.sha256(data.read_bytes()).hexdigest()
    assert (run_dir / "splits.json").read_text() != splits_before


def test_same_ids_other_text_names_the_data_only(run):
    run_dir, _ = run
    data = run_dir.parent / "toy.jsonl"
    data.write_text(data.read_text().replace("case 1.", "case one."))
    code, output = invoke(["resume", run_dir])
    assert code == 2 and "changed since the run started" in output and "splits" not in output, output


def test_a_run_without_inputs_json_still_resumes_and_gets_one(run):
    run_dir, port = run
    (run_dir / "inputs.json").unlink()
    with serve_app(toy_server().app(), port=port):
        code, output = invoke(["resume", run_dir])
    assert code == 0, output
    assert len(json.loads((run_dir / "inputs.json").read_text())["data_sha256"]) == 64


# ---- issue 11 item 3 ------------------------------------------------------------------------------------
def test_model_flags_merge_with_a_config_file(tmp_path):
    """A config file with a grader model and a role map: --base-url/--model change `default` only; the
    grader model and the role that names it stay (it used to fail: "roles... names model 'grader',
    which is not in models")."""
    data = write_toy_questions(tmp_path / "toy.jsonl")
    config = tmp_path / "run.yaml"
    config.write_text(
        "lm:\n  models:\n    default: {backend: openai, base_url: 'http://127.0.0.1:9/v1', model: x, max_retries: 1}\n"
        "    grader: {backend: openai, base_url: 'http://127.0.0.1:9/v1', model: g}\n"
        "  roles: {judge: grader}\n  use_cache: false\n")
    with serve_app(toy_server().app()) as url:
        args = toy_run_args(f"{url}/v1", data, tmp_path, "m", steps=0)
        code, output = invoke([*args, "--config", config, "--set", f"lm.models.grader.base_url={url}/v1",
                               "--any-model"])  # the toy server answers the grader model "g" too
    assert code == 0, output
    recorded = (tmp_path / "m" / "config.yaml").read_text()
    import yaml
    lm = yaml.safe_load(recorded)["lm"]
    assert lm["models"]["default"]["base_url"] == f"{url}/v1" and lm["models"]["default"]["model"] == "toy"
    assert lm["models"]["default"]["max_retries"] == 1  # the file's settings for its server are kept
    assert lm["models"]["grader"]["model"] == "g" and lm["roles"] == {"judge": "grader"}
    assert lm["use_cache"] is False  # a flag that was not given does not reset the file's choice


def test_model_flag_alone_names_the_model_at_the_files_server():
    from decoevo.engine.config import default_model_from_flags, lm_with_flags

    served = {"backend": "openai", "base_url": "http://h/v1", "model": "a", "api_key_env": "K"}
    assert default_model_from_flags(served, "b", None) == {**served, "model": "b"}
    assert default_model_from_flags({"n_ctx": 4096}, "/m/x.gguf", None) == {"n_ctx": 4096, "gguf_path": "/m/x.gguf",
                                                                          "model": "x"}
    assert default_model_from_flags({"gguf_path": "/m/y.gguf"}, None, "http://s/v1") == {
        "backend": "openai", "base_url": "http://s/v1", "model": "default"}
    assert lm_with_flags(None, None, None, no_cache=True) == {"use_cache": False}
    assert lm_with_flags(3, "m", None) == 3  # not a mapping: validation names it


# ---- issue 21 item 4 and issue 20 item 3: what a resume may change ------------------------------------
def events_of(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]


def test_a_result_changing_edit_of_config_yaml_is_refused_naming_each_key(run):
    run_dir, _ = run
    edit_config(run_dir, "rollouts: 4", "rollouts: 6")
    edit_config(run_dir, "steps: 3", "steps: 5")
    before = (run_dir / "events.jsonl").read_bytes()
    code, output = invoke(["resume", run_dir])
    assert code == 2 and "Traceback" not in output, output
    assert "hyper.rollouts (4 -> 6)" in output and "hyper.steps (3 -> 5)" in output, output
    assert "--accept-changed-config" in output
    assert (run_dir / "events.jsonl").read_bytes() == before  # refused before anything ran


def test_an_accepted_edit_is_recorded_on_the_resume_event_and_becomes_the_reference(run):
    run_dir, port = run
    edit_config(run_dir, "rollouts: 4", "rollouts: 3")
    with serve_app(toy_server().app(), port=port):
        code, output = invoke(["resume", run_dir, "--accept-changed-config"])
    assert code == 0, output
    (resumed,) = [e for e in events_of(run_dir) if e["event"] == "resume"]
    assert resumed["accepted_config_changes"] == ["hyper.rollouts (4 -> 3)"]
    assert resumed["config"]["hyper"]["rollouts"] == 3
    assert json.loads((run_dir / "summary.json").read_text())["status"] == "finished"
    # the finished run's steps edited 3 -> 5: refused, compared with the accepted configuration
    edit_config(run_dir, "steps: 3", "steps: 5")
    code, output = invoke(["resume", run_dir])
    assert code == 2 and "hyper.steps (3 -> 5)" in output and "rollouts" not in output, output


def test_result_neutral_edits_and_resume_set_continue(run):
    run_dir, port = run
    edit_config(run_dir, "timeout_retries: 2", "timeout_retries: 3")  # an edit that cannot change results
    with serve_app(toy_server().app(), port=port):
        code, output = invoke(["resume", run_dir, "--set", "lm.models.default.max_concurrency=1",
                               "--set", "hyper.concurrency=2"])
    assert code == 0, output
    import yaml
    recorded = yaml.safe_load((run_dir / "config.yaml").read_text())  # in force for the next resume too
    assert recorded["lm"]["models"]["default"]["max_concurrency"] == 1 and recorded["hyper"]["concurrency"] == 2
    assert all(not e.get("accepted_config_changes") for e in events_of(run_dir))


@pytest.mark.parametrize("args,key", [(["--set", "hyper.rollouts=6"], "hyper.rollouts"),
                                      (["--set", "lm.models.default.model=other"], "lm.models.default.model"),
                                      (["--set", "budget.max_calls=5"], "budget.max_calls")])
def test_resume_set_refuses_a_result_changing_key_by_name(run, args, key):
    run_dir, _ = run
    before = (run_dir / "events.jsonl").read_bytes()
    code, output = invoke(["resume", run_dir, *args])
    assert code == 2 and f"resume: {key} would change the run's results" in output, output
    assert (run_dir / "events.jsonl").read_bytes() == before


def test_resume_config_file_takes_neutral_settings_only(run, tmp_path):
    run_dir, _ = run
    neutral = tmp_path / "slow-server.yaml"
    neutral.write_text("lm: {models: {default: {first_byte_timeout_s: 120}}}\n")
    changing = tmp_path / "more.yaml"
    changing.write_text("hyper: {steps: 9}\n")
    code, output = invoke(["resume", run_dir, "--config", changing])
    assert code == 2 and "hyper.steps would change the run's results" in output, output
    from decoevo.cli.settings import resume_config

    assert resume_config(run_dir, neutral).lm.models["default"].first_byte_timeout_s == 120


def test_one_classification_of_neutral_keys():
    from decoevo.engine.resume_config import result_changes, result_neutral

    assert result_neutral("lm.models.judge.timeout_s") and result_neutral("hyper.concurrency")
    assert result_neutral("tracking.uri") and result_neutral("lm.models.default.requests_per_minute")
    assert not result_neutral("hyper.steps") and not result_neutral("lm.models.judge.model")
    assert not result_neutral("lm.roles.judge") and not result_neutral("budget.max_cost")
    assert result_changes({"hyper": {"steps": 3, "concurrency": 8}}, {"hyper": {"steps": 3, "concurrency": 1}}) == []
    assert result_changes({"lm": {"roles": {}}}, {"lm": {"roles": {"judge": "big"}}}) == [
        "lm.roles.judge (unset -> 'big')"]
