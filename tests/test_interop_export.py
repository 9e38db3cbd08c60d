"""Issue 38, out, fast: what an export writes (no tool run; tests/test_interop_tools.py runs the tools).
A toy run exported to promptfoo and Inspect AI and its rubrics written: the run is only read, the key
never written, the promptfoo grader is decoevo's judge (prompt, schema) and its verdict maps to level / 4."""

from __future__ import annotations

import json
import shutil
import subprocess
from types import SimpleNamespace

import pytest
import yaml
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.domain import Criterion, Question, Rubric, Skill
from decoevo.interop.bundle import Bundle, Endpoint, solver_system
from decoevo.interop.inspect_out import write_inspect
from decoevo.interop.outdir import OutDir
from decoevo.interop.promptfoo_out import VERDICT_TRANSFORM, write_promptfoo
from decoevo.lm import LMConfig
from decoevo.roles.judge import SYSTEM as JUDGE_SYSTEM
from decoevo.roles.judge import CriterionVerdict
from decoevo.testing.server import serve_app
from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

SECRET = "sk-interop-test-0123456789abcdef"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("export")
    with pytest.MonkeyPatch.context() as env, serve_app(toy_server().app()) as url:
        env.setenv("DECOEVO_CACHE", str(tmp / "cache.sqlite"))  # this module's own cache
        data = write_toy_questions(tmp / "q.jsonl")
        args = toy_run_args(f"{url}/v1", data, tmp / "runs", "toy", steps=1,
                            sets=("splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",))
        assert CliRunner().invoke(app, args).exit_code == 0
        run = tmp / "runs" / "toy"
        before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
        env.setenv("OPENAI_API_KEY", SECRET)
        for to in ("promptfoo", "inspect"):
            result = CliRunner().invoke(app, ["export", str(run), "--to", to, str(tmp / to)])
            assert result.exit_code == 0, result.output
        result = CliRunner().invoke(app, ["rubric", str(run), "--data", str(data), "-o", str(tmp / "r.jsonl")])
        assert result.exit_code == 0, result.output
        assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before  # reading never writes
        yield tmp, run


def test_the_promptfoo_config_holds_both_skills_the_rubrics_and_the_key_by_name_only(exported) -> None:
    tmp, _ = exported
    out = tmp / "promptfoo"
    files = {p: p.read_text() for p in out.rglob("*") if p.is_file()}
    assert not any(SECRET in text for text in files.values())
    config = yaml.safe_load(files[out / "promptfooconfig.yaml"])
    assert [p["label"].split()[0] for p in config["prompts"]] == ["shipped", "initial"]
    (provider,) = config["providers"]
    assert provider["config"]["apiKeyEnvar"] == "OPENAI_API_KEY" and provider["id"] == "openai:chat:toy"
    grader = config["defaultTest"]["options"]["provider"]
    assert grader["config"]["body"]["response_format"]["json_schema"]["schema"] == CriterionVerdict.model_json_schema()
    assert json.loads(files[out / "judge_prompt.json"])[0]["content"] == JUDGE_SYSTEM
    shipped = json.loads(files[out / "prompts" / "shipped.json"])[0]["content"]
    assert "SAFETY" in shipped  # the toy world's learnt skill ships
    tests = yaml.safe_load(files[out / "tests.yaml"])
    assert [t["threshold"] for t in tests] == [0.75] * len(tests)  # without --threshold: S >= 0.75 ("mostly met")
    rubrics = {json.loads(line)["id"]: json.loads(line) for line in (tmp / "r.jsonl").read_text().splitlines()}
    for test in tests:  # the same rubric `decoevo rubric` writes, criterion by criterion, weighted
        want = rubrics[test["metadata"]["decoevo_question_id"]]["rubric"]
        assert [(a["type"], a["value"], a["weight"]) for a in test["assert"]] == [
            ("llm-rubric", c["criterion"], c["weight"]) for c in want]


def test_the_inspect_task_holds_each_samples_rubric(exported) -> None:
    tmp, _ = exported
    out = tmp / "inspect"
    assert not any(SECRET in p.read_text() for p in out.rglob("*") if p.is_file())
    samples = [json.loads(line) for line in (out / "dataset.jsonl").read_text().splitlines()]
    lines = (tmp / "r.jsonl").read_text().splitlines()
    rubrics = {json.loads(line)["id"]: json.loads(line)["rubric"] for line in lines}
    assert len(samples) == 2 and all(s["metadata"]["rubric"] == rubrics[s["id"]] for s in samples)
    settings = json.loads((out / "decoevo.json").read_text())
    assert settings["solver"]["api_key_env"] == "OPENAI_API_KEY" and "@task" in (out / "task.py").read_text()


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.parametrize("level", [0, 1, 2, 3, 4])
def test_the_graders_verdict_becomes_level_over_4(level: int) -> None:
    reply = {"choices": [{"message": {"content": json.dumps({"rationale": "r", "level": level})}}]}
    script = f"const f = {VERDICT_TRANSFORM}; console.log(JSON.stringify(f({json.dumps(reply)})));"
    out = json.loads(subprocess.run(["node", "-e", script], capture_output=True, text=True, check=True).stdout)
    assert out == {"output": {"reason": "r", "score": level / 4, "pass": level >= 3}}


def test_a_multi_turn_question_is_exported_as_its_turns_and_a_single_one_as_its_text() -> None:
    """Inspect sends a sample's `input` to the solver: a conversation as its messages (never flattened into one
    text), a one-turn question as its text; the judge reads the question as decoevo's does either way."""
    from decoevo.interop.inspect_out import samples

    one = Question.from_text("q1", "Is it fine?")
    chat = Question.model_validate({"id": "q2", "turns": [{"role": "user", "content": "My knee hurts."},
                                                          {"role": "assistant", "content": "Since when?"},
                                                          {"role": "user", "content": "Since Monday."}]})
    rubric = {q.id: Rubric(question_id=q.id, generator_version=1, criteria=(Criterion(text="Says A", weight=2),))
              for q in (one, chat)}
    got = samples(SimpleNamespace(questions=[one, chat], rubrics=rubric))  # type: ignore[arg-type]
    assert got[0]["input"] == "Is it fine?"
    assert got[1]["input"] == [t.model_dump() for t in chat.turns]
    assert [s["metadata"]["question"] for s in got] == [one.as_text(), chat.as_text()]  # type: ignore[index]


def test_the_provider_takes_no_key_only_from_a_local_server_and_the_grader_asks_at_temperature_0() -> None:
    from decoevo.interop.promptfoo_out import _openai_provider, grader_body

    def bundle(url: str) -> SimpleNamespace:
        profile = SimpleNamespace(temperature=True, token_param="max_tokens", structured="json_object")
        endpoint = SimpleNamespace(base_url=url, model="m", api_key_env="MY_KEY", profile=profile)
        return SimpleNamespace(solver=endpoint, judge=endpoint, max_tokens_solve=100, max_tokens_judge=50, seed=3)

    for local in ("http://127.0.0.1:8080/v1", "http://localhost:8080/v1", "http://[::1]:8080/v1"):
        assert _openai_provider(bundle(local))["config"]["apiKeyRequired"] is False  # type: ignore[arg-type]
    remote = _openai_provider(bundle("https://api.example.com/v1"))["config"]  # type: ignore[arg-type]
    assert "apiKeyRequired" not in remote and remote["apiKeyEnvar"] == "MY_KEY"
    body = grader_body(bundle("http://127.0.0.1:8080/v1"))  # type: ignore[arg-type]
    assert body["temperature"] == 0 and body["seed"] == 3 and body["max_tokens"] == 50


def _bundle(question: Question, skill: str) -> Bundle:
    """A one-question export of a run whose shipped skill is `skill` (no run or server needed)."""
    rubric = Rubric(question_id=question.id, generator_version=2, criteria=(Criterion(text="Says A", weight=2),))
    endpoint = Endpoint(base_url="http://127.0.0.1:8080/v1", model="m", api_key_env="OPENAI_API_KEY")
    return Bundle(run="runs/r", shipped=Skill(kind="solver", version=3, text=skill),
                  initial=Skill(kind="solver", version=0, text=""),
                  generator=Skill(kind="generator", version=2, text="g"),
                  questions=(question,), rubrics={question.id: rubric}, solver=endpoint, judge=endpoint,
                  judge_mode="per_criterion", seed=3, max_tokens_solve=100, max_tokens_judge=50, lm=LMConfig())


def test_a_non_english_question_and_skill_are_written_as_text_in_the_inspect_and_promptfoo_exports(tmp_path) -> None:
    """Issue 46.2: people read and edit the exported files (a question found by its words, the shipped skill read
    in decoevo.json or a prompt file): text outside ASCII is written as itself, never as \\u escapes. (The tools
    read the same values either way: checked here by parsing each file back.)"""
    text, skill = "跑步后膝盖疼，该怎么办？", "先问清楚疼在哪里，再给建议。"
    bundle = _bundle(Question.from_text("q1", text), skill)
    write_inspect(bundle, OutDir(tmp_path / "inspect"))
    write_promptfoo(bundle, OutDir(tmp_path / "promptfoo"))
    inspect_files = {name: (tmp_path / "inspect" / name).read_text("utf-8")
                     for name in ("dataset.jsonl", "decoevo.json")}
    assert text in inspect_files["dataset.jsonl"] and json.loads(inspect_files["dataset.jsonl"])["input"] == text
    assert skill in inspect_files["decoevo.json"]
    assert json.loads(inspect_files["decoevo.json"])["skills"]["shipped"]["system"] == solver_system(bundle.shipped)
    prompt = (tmp_path / "promptfoo" / "prompts" / "shipped.json").read_text("utf-8")
    assert skill in prompt and json.loads(prompt)[0]["content"] == solver_system(bundle.shipped)
    tests = (tmp_path / "promptfoo" / "tests.yaml").read_text("utf-8")
    assert text in tests and yaml.safe_load(tests)[0]["vars"]["question"] == text


def test_an_exported_promptfoo_test_opens_with_its_description_and_keeps_the_users_variables_first(tmp_path) -> None:
    """Issue 46.2: tests.yaml is read in the order it is written: each test opens with its description (the case a
    person looks for), and its variables are the user's, in the order they wrote them, then the question and
    decoevo's judge's quote of it. promptfoo's results list the variables in the order it first meets them
    (its evaluator's `setVars(Array.from(vars))`), so the user's own columns come first there too."""
    own = {"question_var": "query", "description": "knee case", "vars": {"tone": "calm", "age": 40},
           "assert": [{"type": "icontains", "value": "knee"}], "metadata": {"owner": "ana"}}
    question = Question.model_validate({"id": "t001", "turns": [{"role": "user", "content": "My knee hurts."}],
                                        "meta": {"promptfoo": own}})
    write_promptfoo(_bundle(question, "Ask first."), OutDir(tmp_path))
    (test,) = yaml.safe_load((tmp_path / "tests.yaml").read_text("utf-8"))
    assert next(iter(test)) == "description" and test["description"] == "knee case"
    assert list(test["vars"]) == ["tone", "age", "query", "question", "decoevo_judge_question"]
    config = yaml.safe_load((tmp_path / "promptfooconfig.yaml").read_text("utf-8"))
    assert list(config) == ["description", "prompts", "providers", "defaultTest", "tests"]


@pytest.mark.parametrize("description", [42, "", None, ["a", "list"]])
def test_a_promptfoo_test_without_a_text_description_is_exported_under_its_question_id(tmp_path, description) -> None:
    """Issue 46.2: a test's description is the text promptfoo shows for it; an imported test whose description is
    not text (a YAML number, a list, empty) is written under its question's id, as a test without one."""
    own = {"question_var": "query", "vars": {}, "description": description}
    question = Question.model_validate({"id": "t007", "turns": [{"role": "user", "content": "My knee hurts."}],
                                        "meta": {"promptfoo": own}})
    write_promptfoo(_bundle(question, "Ask first."), OutDir(tmp_path))
    (test,) = yaml.safe_load((tmp_path / "tests.yaml").read_text("utf-8"))
    assert test["description"] == "t007"
