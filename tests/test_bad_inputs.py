"""A corpus of malformed inputs driven through the real command line.

Each case must end with exit code 2 and a one-paragraph message that names what to fix (the file, the
line and the field where there is one), with no traceback. The cases that happen on resume also check
that nothing already computed is lost: checkpoint.json, skills/ and calls.jsonl are unchanged byte for
byte. No case reaches the embedded model: every `run` points at a server (a dead port unless the case
needs a live one).
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.testing.fake_openai import FakeOpenAI, Reply
from decoevo.testing.server import free_port, serve_app
from decoevo.testing.toy_server import toy_reply, toy_run_args, write_toy_questions

pytest.importorskip("uvicorn")

runner = CliRunner()


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
NO_RETRY = ("--set", "lm.models.default.max_retries=0")


def squash(text: str) -> str:
    """Without any whitespace: rich wraps (and folds long paths) at the console width."""
    return "".join(text.split())


def check_message(code: int, output: str, fragments: list[str]) -> None:
    assert code == 2, output
    assert "Traceback" not in output, output
    assert "error:" in output, output
    message = output[output.index("error:"):].strip()
    assert "\n\n" not in message, f"not one paragraph:\n{output}"
    assert "validation error" not in message and "errors.pydantic.dev" not in message, output
    for fragment in fragments:
        assert squash(fragment) in squash(message), f"{fragment!r} not in:\n{output}"


def invoke(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str]:
    result = runner.invoke(app, args, env=env)
    return result.exit_code, result.output


# ---------------------------------------------------------------------------------------------------
# Data files: (id, --format, file name, content, what the message must name). "{p}" is the file's path.
# A dict content is a folder of files (EQ-Bench); bytes are written as they are.

GOOD = '{"id": "a", "prompt": "How do I sleep better?"}\n'
HB_GOOD = {"prompt_id": "h1", "prompt": [{"role": "user", "content": "hi"}],
           "rubrics": [{"criterion": "greets", "points": 1}]}
WB_GOOD = {"index": 1, "query": "Write a memo.", "checklist": [{"name": "n", "criteria_description": "d"}]}
EQ_CRITERIA = {"creative_writing_criteria.txt": "Imagery\nPacing\n", "negative_criteria.txt": "Pacing\n"}


def jl(*records: Any) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in records)


def scholar(weight: Any) -> str:
    return json.dumps([{"case_id": "c1", "initial_prompt": "What is RAG?", "metric_config": {"name": "m", "config": {
        "other_properties": [{"name": "most_important_item_0", "criterion": "defines it", "weight": weight}]}}}])


DATA_CASES = [
    ("jsonl-truncated-line", "jsonl", "q.jsonl", GOOD + '{"id": "b", "prom',
     ["{p}, line 2", "not valid JSON"]),
    ("jsonl-not-an-object", "jsonl", "q.jsonl", GOOD + '["b", "x"]\n', ["{p}, line 2", "JSON object"]),
    ("jsonl-missing-id", "jsonl", "q.jsonl", GOOD + '{"prompt": "x"}\n', ["{p}, line 2, field 'id'", "missing"]),
    ("jsonl-missing-prompt", "jsonl", "q.jsonl", '{"id": "a"}\n', ["{p}, line 1, field 'prompt'", "missing"]),
    ("jsonl-empty-prompt", "jsonl", "q.jsonl", GOOD + '{"id": "b", "prompt": "   "}\n',
     ["{p}, line 2, field 'prompt'", "empty"]),
    ("jsonl-prompt-wrong-type", "jsonl", "q.jsonl", '{"id": "a", "prompt": 3}\n', ["{p}, line 1, field 'prompt'"]),
    ("jsonl-prompt-bad-turn", "jsonl", "q.jsonl", '{"id": "a", "prompt": [{"role": "robot", "content": "x"}]}\n',
     ["{p}, line 1, field 'prompt'", "role"]),
    ("jsonl-empty-gold-items", "jsonl", "q.jsonl", jl({"id": "a", "prompt": "x", "gold": {"items": []}}),
     ["{p}, line 1, field 'gold.items'", "at least one item"]),
    ("jsonl-gold-item-no-text", "jsonl", "q.jsonl", jl({"id": "a", "prompt": "x", "gold": {"items": [{"points": 1}]}}),
     ["{p}, line 1, field 'gold.items[0].text'"]),
    ("jsonl-gold-points-not-number", "jsonl", "q.jsonl",
     jl({"id": "a", "prompt": "x", "gold": {"items": [{"text": "t", "points": "two"}]}}),
     ["{p}, line 1, field 'gold.items[0].points'", "number"]),
    ("jsonl-gold-no-positive-points", "jsonl", "q.jsonl",
     jl({"id": "a", "prompt": "x", "gold": {"items": [{"text": "t", "points": 0}, {"text": "u", "points": -1}]}}),
     ["{p}, line 1, field 'gold.items'", "positive points"]),
    ("jsonl-non-utf8", "jsonl", "q.jsonl", GOOD.encode() + b'{"id": "b", "prompt": "caf\xe9"}\n',
     ["{p}, line 2", "UTF-8"]),
    ("jsonl-duplicate-ids", "jsonl", "q.jsonl", GOOD + GOOD, ["{p}, line 2, field 'id'", "duplicate id 'a'",
                                                              "line 1"]),
    ("jsonl-empty-file", "jsonl", "q.jsonl", "\n\n", ["{p}", "no questions"]),
    ("healthbench-empty-rubrics", "healthbench", "hb.jsonl", jl(HB_GOOD, {**HB_GOOD, "prompt_id": "h2", "rubrics": []}),
     ["{p}, line 2, field 'rubrics'", "empty"]),
    ("healthbench-rubric-no-points", "healthbench", "hb.jsonl", jl({**HB_GOOD, "rubrics": [{"criterion": "c"}]}),
     ["{p}, line 1, field 'rubrics[0].points'", "missing"]),
    ("healthbench-missing-prompt-id", "healthbench", "hb.jsonl", jl({k: v for k, v in HB_GOOD.items()
                                                                      if k != "prompt_id"}),
     ["{p}, line 1, field 'prompt_id'", "missing"]),
    ("writingbench-empty-checklist", "writingbench", "wb.jsonl", jl(WB_GOOD, {**WB_GOOD, "index": 2, "checklist": []}),
     ["{p}, line 2, field 'checklist'", "non-empty list"]),
    ("writingbench-missing-query", "writingbench", "wb.jsonl", jl({k: v for k, v in WB_GOOD.items() if k != "query"}),
     ["{p}, line 1, field 'query'", "missing"]),
    ("scholarqa-zero-weight", "scholarqa_cs", "sq.json", scholar(0),
     ["{p}", "$[0].metric_config.config.other_properties[0].weight", "positive number"]),
    ("scholarqa-negative-weight", "scholarqa_cs", "sq.json", scholar(-2),
     ["{p}", "other_properties[0].weight", "positive number"]),
    ("scholarqa-not-a-list", "scholarqa_cs", "sq.json", '{"case_id": "c1"}', ["{p}", "JSON list"]),
    # A blank or NaN sanswer is published data (loaded as "no reference"); a list is not.
    ("llmeval-answer-a-list", "llmeval_med", "med.json",
     json.dumps({"知识": [{"problem": "头痛怎么办", "sanswer": ["休息"]}]}, ensure_ascii=False),
     ["{p}", '$["知识"][0].sanswer', "text, a number"]),
    ("llmeval-round-zero", "llmeval_med", "med.json",
     json.dumps({"k": [{"problem": "p", "sanswer": "a", "round": 0}]}), ["{p}", '$["k"][0].round', "positive"]),
    ("eqbench-no-seed-slot", "eqbench_cw", "eq", {
        **EQ_CRITERIA, "creative_writing_prompts_v3.json": json.dumps(
            {"7": {"writing_prompt": "A story about a lighthouse.", "seed_modifiers": ["storm"]}})},
     ['$["7"].writing_prompt', "<SEED>"]),
    ("eqbench-missing-criteria-file", "eqbench_cw", "eq", {
        "negative_criteria.txt": "Pacing\n", "creative_writing_prompts_v3.json": json.dumps(
            {"7": {"writing_prompt": "A story: <SEED>", "seed_modifiers": ["storm"]}})},
     ["creative_writing_criteria.txt", "file not found"]),
    ("researchqa-empty-rubric", "researchqa", "rqa.jsonl", jl({"id": "r1", "query": "Why?", "rubric": []}),
     ["{p}, line 1, field 'rubric'", "non-empty list"]),
]


def write_data(root: Path, name: str, content: Any) -> Path:
    path = root / name
    if isinstance(content, dict):
        path.mkdir()
        for fname, text in content.items():
            (path / fname).write_text(text, encoding="utf-8")
    elif isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def dead_server_args(tmp_path: Path) -> list[str]:
    return ["--runs-root", str(tmp_path / "runs"), "--base-url", f"http://127.0.0.1:{free_port()}/v1",
            "--model", "m", "--preset", "quick", *NO_RETRY]  # quick: the sizes the 16 toy questions hold


@pytest.mark.parametrize("fmt,name,content,fragments", [c[1:] for c in DATA_CASES], ids=[c[0] for c in DATA_CASES])
def test_malformed_data_file(tmp_path, fmt, name, content, fragments):
    path = write_data(tmp_path, name, content)
    code, output = invoke(["run", "--data", str(path), "--format", fmt, *dead_server_args(tmp_path)])
    check_message(code, output, [f.replace("{p}", str(path)) for f in fragments])
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").rglob("checkpoint.json"))


# ---------------------------------------------------------------------------------------------------
# Configuration and command-line cases. `files` are written to tmp_path first; "{t}" is tmp_path.

@dataclass
class Case:
    id: str
    args: list[str]
    fragments: list[str]
    files: dict[str, str] = field(default_factory=dict)
    dead_server: bool = True  # append --base-url of a dead port (and --runs-root) to a `run`


TOY = ["--data", "{t}/toy.jsonl"]
CONFIG_CASES = [
    Case("yaml-unknown-top-level-key", ["run", *TOY, "--config", "{t}/run.yaml"],
         ["{t}/run.yaml", "hyperr: unknown key"],
         {"run.yaml": "method: decoevo\nhyperr:\n  steps: 2\n"}),
    Case("yaml-unknown-nested-key", ["run", *TOY, "--config", "{t}/run.yaml"], ["hyper.stepz: unknown key"],
         {"run.yaml": "hyper:\n  stepz: 2\n"}),
    Case("yaml-invalid", ["run", *TOY, "--config", "{t}/run.yaml"], ["{t}/run.yaml", "not valid YAML", "line 2"],
         {"run.yaml": "hyper:\n  steps: [2\n  batch_size: 3\n"}),
    Case("yaml-not-a-mapping", ["run", *TOY, "--config", "{t}/run.yaml"], ["{t}/run.yaml", "mapping"],
         {"run.yaml": "- steps\n- 2\n"}),
    Case("yaml-wrong-type", ["run", *TOY, "--config", "{t}/run.yaml"], ["hyper.steps", "integer"],
         {"run.yaml": "hyper:\n  steps: many\n"}),
    Case("config-file-missing", ["run", *TOY, "--config", "{t}/nope.yaml"], ["{t}/nope.yaml", "not found"]),
    Case("set-unknown-top-level-key", ["run", *TOY, "--set", "stepz=3"], ["stepz: unknown key"]),
    Case("set-unknown-nested-key", ["run", *TOY, "--set", "lm.models.default.temprature=0"],
         ["lm.models.default.temprature: unknown key"]),
    Case("role-misspelt", ["run", *TOY, "--set", "lm.roles={judg: default}"], ["roles names no such role: judg"]),
    Case("set-without-value", ["run", *TOY, "--set", "hyper.steps"], ["KEY=VALUE", "hyper.steps"]),
    Case("set-wrong-type", ["run", *TOY, "--set", "hyper.steps=many"], ["hyper.steps", "integer"]),
    Case("epsilon-zero", ["run", *TOY, "--set", "hyper.epsilon=0"], ["hyper.epsilon", "greater than 0"]),
    Case("epsilon-negative", ["run", *TOY, "--set", "hyper.epsilon=-0.1"], ["hyper.epsilon", "greater than 0"]),
    Case("gamma-above-one", ["run", *TOY, "--set", "hyper.gamma=1.5"], ["hyper.gamma", "more than 0 and at most 1"]),
    Case("split-negative", ["run", *TOY, "--set", "splits.probe=-1"], ["splits.probe", "greater than or equal to 0"]),
    Case("split-too-small", ["run", *TOY, "--set", "splits.solver_gate=0"], ["'solver_gate' is empty",
                                                                           "splits.solver_gate"]),
    Case("splits-overlap-more-than-data", ["run", *TOY, "--set", "splits.train=14"],
         ["the splits ask for 22", "the data has 16"]),
    Case("unknown-method", ["run", *TOY, "--method", "decoevoo"], ["unknown method 'decoevoo'"]),
    Case("unknown-preset", ["run", *TOY, "--preset", "huge"], ["unknown preset 'huge'", "quick"]),
    Case("unknown-format", ["run", *TOY, "--format", "csv"], ["data.format", "jsonl"]),
    Case("bad-seeds", ["run", *TOY, "--seeds", "0,one"], ["--seeds", "comma-separated integers"]),
    Case("task-spec-missing", ["run", *TOY, "--task-spec", "{t}/spec.txt"],
         ["{t}/spec.txt", "task_spec file not found"]),
    Case("task-spec-empty", ["run", *TOY, "--task-spec", "{t}/spec.txt"], ["{t}/spec.txt", "task_spec file is empty"],
         {"spec.txt": "\n  \n"}),
    Case("data-missing", ["run", "--data", "{t}/nope.jsonl"], ["{t}/nope.jsonl", "file not found"]),
    Case("api-key-file-missing", ["run", *TOY, "--set", "lm.models.default.api_key_file={t}/key.txt"],
         ["api_key_file {t}/key.txt does not exist"]),
    Case("base-url-on-local-backend", ["run", *TOY, "--set", "lm.models.default={base_url: http://x/v1}"],
         ["lm.models.default", "base_url is only for backend 'openai'"], dead_server=False),
    Case("unreachable-server", ["run", *TOY], ["cannot connect", "Nothing was saved", "run the same command again"]),
    Case("resume-not-a-run-dir", ["resume", "{t}"], ["{t}", "not a run directory", "config.yaml"]),
    Case("resume-missing-dir", ["resume", "{t}/nope"], ["{t}/nope", "not a run directory"]),
    Case("export-missing-run", ["export", "{t}/nope"], ["{t}/nope", "not a run directory"]),
    Case("export-not-a-run-dir", ["export", "{t}"], ["{t}", "not a run directory"]),
    # Path("") is ".": the message read ".: file not found"
    Case("rubric-data-empty", ["rubric", "{t}", "--data", ""], ["--data is empty", "give the questions file"]),
]


@pytest.mark.parametrize("case", CONFIG_CASES, ids=[c.id for c in CONFIG_CASES])
def test_bad_configuration_or_command(tmp_path, case):
    write_toy_questions(tmp_path / "toy.jsonl")
    for name, text in case.files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    args = [a.replace("{t}", str(tmp_path)) for a in case.args]
    if args[0] == "run":
        args += dead_server_args(tmp_path) if case.dead_server else ["--runs-root", str(tmp_path / "runs")]
        if args.count("--preset") > 1:  # the case's own preset is the one tested
            last = len(args) - 1 - args[::-1].index("--preset")
            del args[last:last + 2]
    code, output = invoke(args)
    check_message(code, output, [f.replace("{t}", str(tmp_path)) for f in case.fragments])


def test_wrong_model_name_is_named(tmp_path):
    """A server that answers 404 (the model is not served there): exit 2, and the message says so."""
    server = FakeOpenAI(lambda body, n: Reply(status=404))
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(server.app()) as url:
        code, output = invoke(["run", "--data", str(data), "--base-url", f"{url}/v1", "--model", "no-such-model",
                               "--preset", "quick", "--runs-root", str(tmp_path / "runs"), *NO_RETRY])
    check_message(code, output, ["HTTP 404", "'no-such-model'", "/models"])
    bodies = [json.dumps(b, sort_keys=True) for b in server.requests]
    assert bodies and len(set(bodies)) == len(bodies)  # a 404 is not retried


# ---------------------------------------------------------------------------------------------------
# On resume: nothing already computed may be lost.

KEPT = ("checkpoint.json", "calls.jsonl", "splits.json")


def snapshot(run_dir: Path) -> dict[str, str]:
    files = [run_dir / k for k in KEPT] + sorted((run_dir / "skills").rglob("*"))
    return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest() for p in files if p.is_file()}


@pytest.fixture(scope="module")
def partial_run(tmp_path_factory) -> Path:
    """A run whose server went down (503s) after the first completed step: it stops with a checkpoint."""
    root = tmp_path_factory.mktemp("partial")
    data = write_toy_questions(root / "toy.jsonl")
    server = FakeOpenAI(lambda body, n: toy_reply(body, n) if n < 80 else Reply(status=503))  # about half the run
    with serve_app(server.app()) as url:
        args = toy_run_args(f"{url}/v1", data, root, "partial", steps=3, sets=("lm.models.default.max_retries=0",))
        code, output = invoke([*args, "--no-cache"])
    assert code == 2 and "server error 503" in output, output
    run_dir = root / "partial"
    state = json.loads((run_dir / "checkpoint.json").read_text())["state"]
    assert 1 <= state["next_step"] < 3, state
    return run_dir


def edit_unknown_key(run_dir: Path) -> list[str]:
    path = run_dir / "config.yaml"
    path.write_text(path.read_text(encoding="utf-8").replace("hyper:\n", "hyper:\n  stepz: 3\n", 1), encoding="utf-8")
    return [f"{path}", "hyper.stepz: unknown key"]


def edit_bad_yaml(run_dir: Path) -> list[str]:
    path = run_dir / "config.yaml"
    path.write_text(path.read_text(encoding="utf-8") + "hyper: [\n", encoding="utf-8")
    return [f"{path}", "not valid YAML"]


def edit_missing_data(run_dir: Path) -> list[str]:
    path = run_dir / "config.yaml"
    data = str(run_dir.parent / "toy.jsonl")
    path.write_text(path.read_text(encoding="utf-8").replace(data, data + ".moved"), encoding="utf-8")
    return [f"{data}.moved", "file not found"]


def unreachable(run_dir: Path) -> list[str]:
    path = run_dir / "config.yaml"  # the fixture's server has stopped; make sure nothing answers on the port
    path.write_text(re.sub(r"http://127\.0\.0\.1:\d+/v1", f"http://127.0.0.1:{free_port()}/v1",
                           path.read_text(encoding="utf-8")), encoding="utf-8")
    return ["cannot connect", "decoevo resume"]


RESUME_CASES: list[tuple[str, Callable[[Path], list[str]]]] = [
    ("resume-config-unknown-key", edit_unknown_key),
    ("resume-config-invalid-yaml", edit_bad_yaml),
    ("resume-data-moved", edit_missing_data),
    ("resume-unreachable-server", unreachable),
]


@pytest.mark.parametrize("edit", [c[1] for c in RESUME_CASES], ids=[c[0] for c in RESUME_CASES])
def test_bad_resume_keeps_everything_computed(tmp_path, partial_run, edit):
    run_dir = tmp_path / partial_run.name
    shutil.copytree(partial_run, run_dir)
    shutil.copy(partial_run.parent / "toy.jsonl", tmp_path / "toy.jsonl")
    config = run_dir / "config.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace(str(partial_run.parent), str(tmp_path)),
                      encoding="utf-8")
    before = snapshot(run_dir)
    assert {"checkpoint.json", "calls.jsonl"} <= set(before) and any(k.startswith("skills") for k in before)
    fragments = edit(run_dir)
    code, output = invoke(["resume", str(run_dir)])
    check_message(code, output, fragments)
    assert snapshot(run_dir) == before


def test_a_skill_version_the_run_lacks_names_the_versions_it_has(partial_run):
    """`eval --skill-version 99` said "…/v099.md: missing", a file name the user never gave."""
    code, output = invoke(["eval", str(partial_run), "--skill-version", "99"])
    versions = sorted(int(p.stem[1:]) for p in (partial_run / "skills" / "solver").glob("v*.md"))
    check_message(code, output, ["--skill-version 99", f"has solver versions 0..{versions[-1]}"])
    assert "v099" not in output


@pytest.mark.skipif(not Path("/proc/version").is_file(), reason="needs Linux's /proc")
def test_an_output_the_system_refuses_is_named_not_its_temp_file(tmp_path):
    """`rubric -o /proc/version --force`: the write fails creating a temp file beside it; the message named
    that temp file (/proc/.version.tmp1234), not the file the user gave."""
    data = write_toy_questions(tmp_path / "toy.jsonl")
    with serve_app(FakeOpenAI(toy_reply).app()) as url:
        code, output = invoke(toy_run_args(f"{url}/v1", data, tmp_path / "runs", "r", steps=1))
        assert code == 0, output
        code, output = invoke(["rubric", str(tmp_path / "runs" / "r"), "--data", str(data), "-o", "/proc/version",
                               "--force"])
    check_message(code, output, ["/proc/version: cannot be written"])
    assert ".tmp" not in output, output


def test_corpus_size():
    assert len(DATA_CASES) + len(CONFIG_CASES) + 1 + len(RESUME_CASES) >= 30
