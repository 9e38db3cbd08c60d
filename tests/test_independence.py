"""Independent grading: a result graded by a model that also played an optimization role in the run is
labelled "self-graded, not an independent result" in the eval output, the record and the report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.errors import UserError
from decoevo.evaluation.independence import (
    SELF_GRADED_LABEL,
    require_independent_grader,
    same_model,
    self_graded_roles,
    tracking_tags,
)
from decoevo.lm import LMConfig, ModelSpec
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

from .result_files import result_file

runner = CliRunner()
LOCAL_A = "http://127.0.0.1:8000/v1"
LOCAL_B = "http://127.0.0.1:9000/v1"


def served(model: str, base_url: str | None = LOCAL_A, backend: str = "openai") -> ModelSpec:
    return ModelSpec(backend=backend, model=model, base_url=base_url)  # type: ignore[arg-type]


# ---- the pure rule ---------------------------------------------------------------------------------
def test_same_model_rule() -> None:
    # the same name at the same local endpoint (localhost and 127.0.0.1 are one host; a trailing slash is noise)
    assert same_model(served("qwen"), served("QWEN", "http://localhost:8000/v1/"))
    assert tracking_tags({"grader_model": "g", "self_graded": True})["grader_independence"] == SELF_GRADED_LABEL
    assert tracking_tags({"grader_model": "g"})["self_graded"] == "unknown"  # a record from before the field
    # a local server's name identifies a model only there: "default" at two servers is two models
    assert not same_model(served("default"), served("default", LOCAL_B))
    # a hosted model's name identifies it anywhere, with or without a provider prefix
    assert same_model(served("gpt-4.1", "https://api.openai.com/v1"), served("openai/gpt-4.1", None, backend="litellm"))
    assert not same_model(served("gpt-4.1", "https://api.openai.com/v1"), served("gpt-4.1-mini", "https://x.ai/v1"))
    # embedded weights: the same GGUF file (the bundled one by default); embedded and served differ
    assert same_model(ModelSpec(), ModelSpec(model="other-label"))
    assert not same_model(ModelSpec(), ModelSpec(gguf_path="/m/qwen.gguf"))
    assert not same_model(ModelSpec(), served("smollm2-135m-instruct-q4_1"))


def test_roles_routing_decides_which_roles_are_self_graded() -> None:
    run = LMConfig(
        models={"default": served("small"), "big": served("big", LOCAL_B)},
        roles={"judge": "big", "structural_audit": "big", "grader_healthbench": "big"},
    )
    assert self_graded_roles(run, served("big", LOCAL_B)) == {"judge", "structural_audit"}
    assert "solve" in self_graded_roles(run, served("small"))
    assert self_graded_roles(run, served("judge-free", LOCAL_B)) == frozenset()


def test_require_independent_grader_refuses_in_one_line_unless_allowed() -> None:
    run = LMConfig(models={"default": served("small")})
    with pytest.raises(UserError) as exc:
        require_independent_grader(run, None, allow_self_grading=False, grader_role="grader_healthbench")
    message = str(exc.value)
    assert "\n" not in message and "--allow-self-grading" in message and SELF_GRADED_LABEL in message
    assert require_independent_grader(run, None, allow_self_grading=True).self_graded
    assert not require_independent_grader(run, served("other", LOCAL_B), allow_self_grading=False).self_graded
    # the run's own config may send the grader to a separate model: that is independent
    routed = LMConfig(models={"default": served("small"), "g": served("g", LOCAL_B)}, roles={"grader_healthbench": "g"})
    assert not require_independent_grader(
        routed, None, allow_self_grading=False, grader_role="grader_healthbench"
    ).self_graded


# ---- through the CLI on a toy run: eval output, record, report ---------------------------------------
def test_self_graded_result_is_labelled_in_output_record_and_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.chdir(tmp_path)
    data = write_toy_questions(tmp_path / "toy.jsonl")
    splits = "splits={train: 5, probe: 2, solver_gate: 3, generator_gate: 3, diagnostic: 1, test: 2}"
    with serve_app(toy_server().app()) as url:
        runs = {}
        for name in ("own", "separate"):
            args = toy_run_args(f"{url}/v1", data, tmp_path / "runs", name, steps=1, sets=(splits,))
            assert runner.invoke(app, args).exit_code == 0
            runs[name] = tmp_path / "runs" / name
        own = runner.invoke(app, ["eval", str(runs["own"])])  # no grader given: the run's own model grades
        # the same toy server under another model name is, for this rule, another local model
        separate = runner.invoke(
            app, ["eval", str(runs["separate"]), "--grader-base-url", f"{url}/v1", "--grader-model", "toy-grader"]
        )
    assert own.exit_code == 0 and separate.exit_code == 0, own.output + separate.output
    assert SELF_GRADED_LABEL in " ".join(own.output.split())
    assert "self-graded" not in separate.output
    own_rec = json.loads(result_file(runs["own"]).read_text())
    sep_rec = json.loads(result_file(runs["separate"]).read_text())
    assert own_rec["self_graded"] is True and "solve" in own_rec["self_graded_roles"]
    assert own_rec["grader_model"] == "toy"
    assert sep_rec["self_graded"] is False and sep_rec["grader_model"] == "toy-grader"

    for name, self_graded in (("own", True), ("separate", False)):
        out = tmp_path / f"{name}.html"
        result = runner.invoke(app, ["report", str(runs[name]), "-o", str(out)])
        assert result.exit_code == 0, result.output
        html = out.read_text()
        assert (SELF_GRADED_LABEL in html) is self_graded
        assert "our prompt</span>" in html  # which grader prompt graded the column (none fetched here)
        assert (
            '<span class="grader small muted" title="gold grader of this column">'
            f"{'toy' if self_graded else 'toy-grader'}</span>" in html
        )

    # a record written before `self_graded` existed still reads, and is judged by its grader's name
    old = {k: v for k, v in own_rec.items() if k not in {"self_graded", "self_graded_roles", "grader_independence"}}
    result_file(runs["own"]).unlink()  # as a run evaluated before one file per version has it: eval/test.json
    (runs["own"] / "eval" / "test.json").write_text(json.dumps(old))
    assert runner.invoke(app, ["report", str(runs["own"]), "-o", str(tmp_path / "old.html")]).exit_code == 0
    assert SELF_GRADED_LABEL in (tmp_path / "old.html").read_text()
