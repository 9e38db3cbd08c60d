"""Issue 44 part 3: an import accounts for everything. What a promptfoo config or an Inspect dataset held and
decoevo did not use is said per assertion type with counts (`--strict` refuses it); the user's own
assertions and fields are kept verbatim for the export; the `providers:` block names the model; an Inspect
target is the question's gold rubric, so `compare` works; the input is bounded and odd files are refused
in one line, never a traceback."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from decoevo.cli import app
from decoevo.errors import ConfigError, DatasetError
from decoevo.interop import read_imported

runner = CliRunner()
CHAT = '[{"role": "system", "content": "You are a careful sports-medicine assistant."},\n' \
       ' {"role": "user", "content": "{{query}}"}]'
KEY = "sk-THIS-IS-A-SECRET-0123456789"


def _config(tests: list[dict[str, Any]], providers: Any = None, default: Any = None) -> dict[str, Any]:
    config: dict[str, Any] = {"description": "Knee pain helper", "prompts": ["file://prompt.json"]}
    if providers is not None:
        config["providers"] = providers
    if default is not None:
        config["defaultTest"] = default
    config["tests"] = tests
    return config


def _write(folder: Path, config: dict[str, Any]) -> Path:
    (folder / "prompt.json").write_text(CHAT, encoding="utf-8")
    path = folder / "promptfooconfig.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _mixed_tests(n: int = 12) -> list[dict[str, Any]]:
    """A user's suite: rubric tests with a cheap check beside the rubric, and tests promptfoo alone can run."""
    tests: list[dict[str, Any]] = []
    for i in range(n):
        q = {"query": f"My knee hurts after running, case {i}. What should I do?", "expected": "rest"}
        if i % 4 == 3:  # only JavaScript: nothing decoevo can use
            tests.append({"description": f"length {i}", "vars": q,
                          "assert": [{"type": "javascript", "value": "output.length < 900"}]})
        else:
            tests.append({"vars": q, "assert": [
                {"type": "llm-rubric", "value": "Suggests rest and ice", "weight": 2, "threshold": 0.5,
                 "metadata": {"owner": "ana"}},
                {"type": "contains" if i % 2 else "icontains", "value": "{{expected}}"}],
                "options": {"transform": "output.trim()"}})
    return tests


PROVIDERS = [{"id": "openai:chat:qwen2.5-0.5b",
              "config": {"apiBaseUrl": "http://127.0.0.1:8080/v1", "temperature": 0, "max_tokens": 300,
                         "apiKey": KEY}}]
DEFAULT = {"assert": [{"type": "llm-rubric", "value": "Tells the user when to see a doctor", "weight": 3},
                      {"type": "latency", "threshold": 5000}]}


def test_the_account_counts_every_assertion_type_and_names_the_tests_left_unchecked(tmp_path: Path) -> None:
    got = read_imported(_write(tmp_path, _config(_mixed_tests(), PROVIDERS, DEFAULT)), "promptfoo")
    assert got.summary is not None
    lines = got.account()
    assert lines[0] == ("read 12 tests: 9 llm-rubric -> gold rubric/task spec, "
                        "1 llm-rubric (defaultTest) -> every test's gold rubric/task spec")
    assert ("not used: 6 icontains, 3 contains, 3 javascript, 1 latency (defaultTest) "
            "(promptfoo runs these; decoevo cannot)") in lines
    assert ("not used: 9 test field 'options' (kept for the export; a decoevo run does not use it)") in lines
    assert ("3 tests have only assertions decoevo does not use: t004 (promptfooconfig.yaml:61 'length 3'), "
            "t008 (promptfooconfig.yaml:110 'length 7'), t012 (promptfooconfig.yaml:159 'length 11')") in lines
    assert any("credential(s) written in the file" in line for line in lines)
    assert {u.kind: u.count for u in got.summary.unused} == {
        "contains": 3, "icontains": 6, "javascript": 3, "latency (defaultTest)": 1, "test field 'options'": 9}


@pytest.mark.parametrize(("n", "named", "more"), [(32, 8, ""), (36, 8, " and 1 more")])
def test_the_account_names_eight_unchecked_tests_and_counts_every_one_past_them(tmp_path: Path, n: int, named: int,
                                                                                 more: str) -> None:
    """Issue 46.2: every test left without a check is accounted for; the ninth was dropped from the line
    (no "and 1 more") when the count of those past the eight named was compared with 1 instead of 0."""
    got = read_imported(_write(tmp_path, _config(_mixed_tests(n))), "promptfoo")
    [line] = [x for x in got.account() if "have only assertions decoevo does not use" in x]
    unchecked = n // 4
    assert line.startswith(f"{unchecked} tests have only assertions decoevo does not use: t004 ")
    assert line.count("promptfooconfig.yaml:") == named and line.endswith(f"'length {4 * named - 1}')" + more)


def test_strict_refuses_anything_unused_in_one_line(tmp_path: Path) -> None:
    path = _write(tmp_path, _config(_mixed_tests()))
    result = runner.invoke(app, ["run", "--data", str(path), "--format", "promptfoo", "--strict",
                                 "--runs-root", str(tmp_path / "runs")])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "--strict" in said and "6 icontains, 3 contains, 3 javascript" in said and "Traceback" not in said
    assert not (tmp_path / "runs").exists()
    tests = _mixed_tests(4)
    tests[3]["description"] = "\x1b]0;owned\x07\x1b[2J"
    result = runner.invoke(app, ["run", "--data", str(_write(tmp_path, _config(tests))), "--format", "promptfoo",
                                 "--preset", "none-such", "--runs-root", str(tmp_path / "runs")])  # said, then refused
    assert result.exit_code == 2 and "have only assertions decoevo does not use" in result.output
    assert "\x1b" not in result.output and "\x07" not in result.output  # a description is never a terminal control
    clean = [{"vars": {"query": "Is it fine to run through the pain?"},
              "assert": [{"type": "llm-rubric", "value": "Says to stop"}]}]
    assert read_imported(_write(tmp_path, _config(clean)), "promptfoo").summary.unused == ()  # type: ignore[union-attr]


def test_the_users_own_assertions_and_fields_are_kept_verbatim_and_no_key_is(tmp_path: Path) -> None:
    tests = _mixed_tests(4)
    got = read_imported(_write(tmp_path, _config(tests, PROVIDERS, DEFAULT)), "promptfoo")
    for q, test in zip(got.questions, tests, strict=True):
        kept = q.meta["promptfoo"]
        assert kept["assert"] == test["assert"]  # every type, with weight, threshold and metadata
        assert kept["vars"] == {"expected": "rest"} and kept["question_var"] == "query"
        assert {k: v for k, v in kept.items() if k not in ("assert", "vars", "question_var")} == {
            k: v for k, v in test.items() if k not in ("assert", "vars")}
    assert got.kept["defaultTest"] == DEFAULT
    assert got.kept["providers"] == [{"id": "openai:chat:qwen2.5-0.5b", "config": {
        "apiBaseUrl": "http://127.0.0.1:8080/v1", "temperature": 0, "max_tokens": 300}}]  # the key left out
    assert KEY not in got.jsonl() and KEY not in json.dumps(got.kept) and KEY not in repr(got)


@pytest.mark.parametrize(("raw", "want"), [
    ("openai:gpt-4o-mini", ("gpt-4o-mini", "https://api.openai.com/v1", "OPENAI_API_KEY")),
    ([{"id": "openai:chat:qwen", "config": {"apiBaseUrl": "http://h:9/v1/", "apiKeyEnvar": "MY_KEY"}}],
     ("qwen", "http://h:9/v1", "MY_KEY")),
    ([{"openai:chat:m": {"config": {"apiHost": "llm.example.com"}}}], ("m", "https://llm.example.com/v1", None)),
    (["ollama:chat:llama3.2", "openai:gpt-4o"], ("llama3.2", "http://localhost:11434/v1", None)),
    ("groq:llama-3.1-8b-instant", ("llama-3.1-8b-instant", "https://api.groq.com/openai/v1", "GROQ_API_KEY")),
    ("exec: python call.py", "'exec' is a provider kind promptfoo runs itself"),
    ("file://provider.py", "a file:// reference decoevo does not read"),
    ("openai:completion:davinci-002", "not a chat API"),
    ([{"id": "openai:chat:m", "config": {"apiBaseUrl": "{{ env.URL }}"}}], "a template promptfoo renders"),
    ([{"id": "openai:chat:m", "config": {"apiBaseUrl": "https://u:p@h/v1"}}], "carries credentials"),
    ([{"id": "openai:chat:m", "config": {"apiKeyEnvar": "A-B"}}], "not a variable name"),
    (None, "none in the file"),
    ([], "the list is empty"),
    ([{"id": "openai:chat:m", "config": {"apiBaseUrl": ""}}], "config.apiBaseUrl is not text"),
    ([{"id": "openai:chat:m", "config": {"apiBaseUrl": "http://h:9/v1 x"}}], "holds spaces or control characters"),
    ("ollama:completion:llama3.2", "not a chat API"),
    ("openai:chat:", "it names no model"),
    ("openai:chat:m\x07", "it names no model"),
    ([{"id": "openai:chat:m", "config": {"max_tokens": 0}}], "not a positive whole number"),
    ([{"id": "openai:chat:m", "config": {"max_tokens": 1}}], ("m", "https://api.openai.com/v1", None)),
])
def test_the_providers_block_names_the_model_or_says_why_not(raw: Any, want: Any) -> None:
    from decoevo.interop.promptfoo_model import imported_model

    model, note = imported_model(raw)
    if isinstance(want, str):
        assert model is None and note is not None and want in note and "\n" not in note
        return
    assert model is not None and (model.model, model.base_url) == want[:2]
    if want[2] is not None:
        assert model.api_key_env == want[2]


def test_a_promptfoo_run_calls_the_files_provider_and_says_what_it_read(toy_env: Path) -> None:
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_server

    tests = [{"vars": {"query": f"My knee hurts after running, case {i}. What should I do?"},
              "assert": [{"type": "llm-rubric", "value": "Suggests rest and ice"}] if i % 3
              else [{"type": "javascript", "value": "output.length > 3"}]} for i in range(16)]
    with serve_app(toy_server().app()) as url:
        providers = [{"id": "openai:chat:toy", "config": {"apiBaseUrl": f"{url}/v1", "temperature": 0,
                                                           "max_tokens": 300, "apiKey": KEY}}]
        path = _write(toy_env, _config(tests, providers, DEFAULT))
        result = runner.invoke(app, [
            "run", "--data", str(path), "--format", "promptfoo", "--preset", "default", "--name", "pf",
            "--set", "splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",
            "--set", "hyper={steps: 1, batch_size: 2, audit_every: 1, rollouts: 4}"])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert "read 16 tests: 10 llm-rubric -> gold rubric/task spec" in said
    assert "not used: 6 javascript, 1 latency (defaultTest) (promptfoo runs these; decoevo cannot)" in said
    assert (f"model: toy at {url}/v1 (from providers: openai:chat:toy; key from $OPENAI_API_KEY); max_tokens 300 "
            "-> hyper.max_tokens_solve; temperature 0 not used") in said
    run = toy_env / "runs" / "pf"
    config = yaml.safe_load((run / "config.yaml").read_text())
    assert config["lm"]["models"]["default"]["base_url"] == f"{url}/v1"
    assert config["hyper"]["max_tokens_solve"] == 300
    record = json.loads((run / "import.json").read_text())
    assert record["kept"]["defaultTest"] == DEFAULT and record["account"][0].startswith("read 16 tests")
    assert not any(KEY in p.read_text(errors="replace") for p in run.rglob("*") if p.is_file())


def test_a_given_model_wins_over_the_files_provider_and_says_so(tmp_path: Path) -> None:
    from decoevo.cli.import_flags import flags_with_imported_model
    from decoevo.cli.settings import RunFlags

    imported = read_imported(_write(tmp_path, _config(_mixed_tests(2), PROVIDERS)), "promptfoo")
    flags, line = flags_with_imported_model(RunFlags(base_url="http://x/v1", model="m"), imported)
    assert (flags.base_url, flags.model, flags.sets) == ("http://x/v1", "m", ())
    assert line == "providers: openai:chat:qwen2.5-0.5b not used: --model/--base-url given"
    flags, line = flags_with_imported_model(RunFlags(sets=("hyper.max_tokens_solve=99",)), imported)
    assert (flags.base_url, flags.model) == ("http://127.0.0.1:8080/v1", "qwen2.5-0.5b")
    assert line is not None and "max_tokens 300 not used: --set hyper.max_tokens_solve given" in line


def _inspect_samples(path: Path, n: int = 16) -> Path:
    path.write_text("".join(json.dumps({
        "id": f"k{i:02d}", "input": f"My knee hurts after running, case {i}. What should I do?",
        "target": "Rest, ice, and see a doctor if it persists", "metadata": {"case": i}}) + "\n"
        for i in range(n)), encoding="utf-8")
    return path


def test_an_inspect_target_is_the_gold_rubric(tmp_path: Path) -> None:
    path = tmp_path / "d.jsonl"
    path.write_text(json.dumps({"input": "Capital of France?", "target": "Paris"}) + "\n"
                    + json.dumps({"input": "A prime?", "target": ["2", "3"], "choices": ["2", "4"]}) + "\n"
                    + json.dumps({"input": "Say hi", "metadata": {"rubric": [{"criterion": "Greets", "weight": 2}]},
                                  "target": "hi"}) + "\n", encoding="utf-8")
    got = read_imported(path, "inspect")
    golds = [[(i.text, i.points) for i in q.gold.items] for q in got.questions if q.gold is not None]
    assert golds == [[("The answer agrees with the reference answer: Paris", 1.0)],
                     [("The answer agrees with one of the reference answers: 2 | 3", 1.0)],
                     [("Greets", 2.0)]]
    assert got.questions[1].meta["inspect"] == {"target": ["2", "3"], "metadata": {}, "choices": ["2", "4"]}
    assert got.account()[:2] == [
        "read 3 samples: 1 metadata.rubric -> gold rubric, 2 target -> gold rubric (one criterion: agrees with "
        "the reference)",
        "not used: 1 choices (multiple-choice options Inspect's multiple_choice solver shows; decoevo asks the "
        "input alone)"]
    with pytest.raises(ConfigError, match=r"^--strict: d\.jsonl holds what decoevo does not use \(1 choices\)"):
        read_imported(path, "inspect", strict=True)


def test_an_inspect_run_then_the_compare_its_next_line_names(toy_env: Path) -> None:
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_server

    data = _inspect_samples(toy_env / "samples.jsonl")
    with serve_app(toy_server().app()) as url:
        result = runner.invoke(app, [
            "run", "--data", str(data), "--format", "inspect", "--base-url", f"{url}/v1", "--model", "toy",
            "--preset", "default", "--name", "ins",
            "--set", "splits={train: 6, probe: 2, solver_gate: 3, generator_gate: 3, test: 2}",
            "--set", "hyper={steps: 1, batch_size: 2, audit_every: 1, rollouts: 4}"])
        assert result.exit_code == 0, result.output
        assert "read 16 samples: 16 target -> gold rubric" in " ".join(result.output.split())
        nexts = [line.strip() for line in result.output.split("next:")[1].splitlines()
                 if line.strip().startswith("decoevo compare")]
        assert nexts, result.output
        compared = runner.invoke(app, nexts[0].split()[1:])
    assert compared.exit_code == 0, compared.output
    record = json.loads(next((toy_env / "runs" / "ins" / "eval").glob("compare-*.json")).read_text())
    assert record["n_paired"] == 2


def test_a_file_over_the_bound_is_refused_before_it_is_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    big = tmp_path / "promptfooconfig.yaml"
    with big.open("wb") as f:  # 80 MB without writing them: a sparse file
        f.truncate(80_000_000)
    for fmt in ("promptfoo", "inspect"):
        result = runner.invoke(app, ["run", "--data", str(big), "--format", fmt, "--limit", "3",
                                     "--runs-root", str(tmp_path / "runs")])
        assert result.exit_code == 2, result.output
        said = " ".join(result.output.split())
        assert "is 80.0 MB, more than decoevo reads from an imported file (10 MB)" in said
        assert "DECOEVO_IMPORT_MAX_MB" in said and "Traceback" not in said
    monkeypatch.setenv("DECOEVO_IMPORT_MAX_MB", "0.0001")
    small = _write(tmp_path, _config(_mixed_tests(4)))
    with pytest.raises(ConfigError, match=r"\(0.0001 MB\); split it, or raise the bound"):
        read_imported(small, "promptfoo")


@pytest.mark.parametrize(("text", "where"), [
    ("prompts: ['{{query}}']\ntests:\n  - vars:\n      query: a\n      query: b\n",
     r"line 5: the key 'query' is given twice \(first on line 4\)"),
    ("prompts: ['{{query}}']\ntests:\n  - vars: {query: .nan}\n", r"line 3, field 'tests\[0\]\.vars\.query': is nan"),
    ("prompts: ['{{query}}']\ntests:\n  - vars: {query: .inf}\n", "is inf, not a question"),
    ("prompts: ['{{query}}']\ntests:\n  - vars: {query: a, n: .nan}\n", r"vars\.n': is nan \(not a finite number\)"),
    ("prompts: ['{{query}}']\ntests:\n  - vars: {query: a, b: !!binary aGk=}\n", "holds a bytes value"),
    ("prompts: ['{{query}}']\ntests:\n  - vars: {query: a\n", r"line 4: not valid YAML"),
    ("prompts: ['{{query}}']\n\ntests:\n  - vars: {query: a}\n    assert: [1, 2]\n",
     r"line 5, field 'tests\[0\]\.assert\[0\]': must be a mapping"),  # a list's own line
    ("prompts: ['{{query}}']\ntests:\n  - vars:\n      query: a\n      n:\n        m: .nan\n",
     r"line 6, field 'tests\[0\]\.vars\.n\.m': is nan"),  # a nested mapping's own line
    # a rubric of weight 0 counts for nothing: refused, never read as a requirement (or its reverse)
    ("prompts: ['{{query}}']\ntests:\n  - vars: {query: a}\n    assert:\n"
     "      - {type: llm-rubric, value: ok, weight: 0}\n",
     r"line 5, field 'tests\[0\]\.assert\[0\]\.weight': must be a positive number"),
])
def test_odd_promptfoo_files_are_refused_naming_the_line(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=where):
        read_imported(path, "promptfoo")


def test_a_date_stays_the_text_it_was_written_as(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("prompts: ['{{query}}']\ntests:\n  - vars: {query: 2024-01-01, day: 2024-01-02}\n",
                    encoding="utf-8")
    (q,) = read_imported(path, "promptfoo").questions
    assert q.as_text() == "2024-01-01" and q.meta["promptfoo"]["vars"] == {"day": "2024-01-02"}


@pytest.mark.parametrize(("name", "text", "where"), [
    ("d.csv", 'input,target\nhello,1\n"broken,2\nmore,3\n',
     "line 3: a quoted cell opens on this line and is never closed$"),
    ("d.csv", 'input,target,input\nhello,1,2\n', "line 1: the header names the column 'input' twice"),
    ("d.jsonl", '{"input": "x"}\n{"input": "y", "metadata": {"a": NaN}}\n', r"line 2: not valid JSON \(NaN is not"),
    ("d.json", '[\n  {"input": "x"},\n  {"input": "y",\n   "target": 3}\n]\n', "line 3, field 'target'"),
    ("d.json", '{"input": "x"}', "a .json dataset is an array of samples"),
    ("d.json", '[\n  {"input": "x"},\n  oops\n]\n', "line 3: not valid JSON"),
    ("d.csv", 'question,target\nhello,1\n', "line 1, field 'input': the header has no input column"),
    ("d.jsonl", '{"input": "x", "metadata": [1]}\n', "line 1, field 'metadata': must be an object"),
    ("d.jsonl", '{"input": [{"role": "user", "content": [{"type": "image", "image": "a.png"}]}]}\n',
     "holds non-text content"),
    ("d.jsonl", '{"input": [{"role": "user", "content": [{"type": "text", "text": 3}]}]}\n', "holds non-text content"),
])
def test_odd_inspect_files_are_refused_naming_the_line(tmp_path: Path, name: str, text: str, where: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(DatasetError, match=where):
        read_imported(path, "inspect")


def test_promptfoo_csv_tests_an_unterminated_quote_and_their_assertions(tmp_path: Path) -> None:
    (tmp_path / "tests.csv").write_text(
        'query,__expected1,__expected2\n'
        '"Knee pain?","grade: Suggests rest","contains: knee"\n'
        '"Run through it?",Paris,"fn: output.length > 3"\n', encoding="utf-8")
    path = tmp_path / "c.yaml"
    path.write_text("prompts: ['{{query}}']\ntests: file://tests.csv\n", encoding="utf-8")
    got = read_imported(path, "promptfoo")
    assert [q.meta["promptfoo"]["assert"] for q in got.questions] == [
        [{"type": "llm-rubric", "value": "Suggests rest"}, {"type": "contains", "value": "knee"}],
        [{"type": "equals", "value": "Paris"}, {"type": "javascript", "value": "output.length > 3"}]]
    assert got.account()[1] == "not used: 1 contains, 1 equals, 1 javascript (promptfoo runs these; decoevo cannot)"
    (tmp_path / "tests.csv").write_text('query\n"fine"\n"never closed\nmore\n', encoding="utf-8")
    with pytest.raises(DatasetError, match=r"tests\.csv, line 3: a quoted cell opens on this line and is never closed"):
        read_imported(path, "promptfoo")


def test_an_inspect_json_array_dataset_is_read(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text(json.dumps([{"id": 1, "input": "Capital of France?", "target": "Paris"},
                                {"input": [{"role": "user", "content": "Hi"}]}], indent=2), encoding="utf-8")
    got = read_imported(path, "inspect")
    assert [q.id for q in got.questions] == ["1", "s0002"] and got.questions[0].gold is not None


# Property: any file either loads (and what it gives is strict JSON) or is a user error in one line.
keys = st.sampled_from(["prompts", "tests", "vars", "assert", "type", "value", "weight", "defaultTest", "query",
                        "providers", "id", "config", "apiBaseUrl", "description", "options", "input", "target",
                        "metadata", "rubric", "criterion", "role", "content", "choices"]) | st.integers(-2, 2)
scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True)
           | st.text(max_size=12) | st.sampled_from(["{{query}}", "llm-rubric", "javascript", "file://x.csv",
                                                      "openai:chat:m", "user"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=5),
                      max_leaves=25)


def _loads_or_refuses(path: Path, fmt: str) -> None:
    try:
        got = read_imported(path, fmt)
    except (DatasetError, ConfigError) as exc:
        assert "\n" not in str(exc)
        cli = runner.invoke(app, ["run", "--data", str(path), "--format", fmt, "--runs-root", str(path.parent / "r")])
        assert cli.exit_code == 2 and "Traceback" not in cli.output and not (path.parent / "r").exists()
        return
    assert got.questions
    for row in got.jsonl().splitlines():  # strict JSON: no NaN, every key text
        json.loads(row, parse_constant=lambda c: pytest.fail(f"{c} in questions.jsonl"))
    json.dumps(got.kept, allow_nan=False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=values)
@example(value={"prompts": ["{{q}}"], "tests": [{"vars": {1: "a", 2: "b"}}]})
@example(value={"prompts": ["{{query}}"], "tests": [{"vars": {"query": "a", "n": math.nan}}]})
def test_any_promptfoo_config_loads_or_is_a_user_error(tmp_path: Path, value: Any) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(value, allow_unicode=True, sort_keys=False), encoding="utf-8")
    _loads_or_refuses(path, "promptfoo")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(values, min_size=1, max_size=3), suffix=st.sampled_from([".jsonl", ".json"]))
@example(rows=[{"input": "x", "metadata": {"a": math.nan}}], suffix=".jsonl")
@example(rows=[{"input": "x", "target": "t"}], suffix=".json")
def test_any_inspect_dataset_loads_or_is_a_user_error(tmp_path: Path, rows: list[Any], suffix: str) -> None:
    path = tmp_path / f"d{suffix}"
    text = ("\n".join(json.dumps(r) for r in rows) if suffix == ".jsonl" else json.dumps(rows, indent=1))
    path.write_text(text, encoding="utf-8")
    _loads_or_refuses(path, "inspect")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.text(alphabet=st.sampled_from(list('ab,"\n\r :[]{}-#&*!|>\'\\\x00é')), max_size=80),
       name=st.sampled_from(["d.csv", "d.json", "d.jsonl", "c.yaml", "tests.csv"]))
@example(text='prompts: ["{{q}}"]\ntests:\n  - vars: {1: a, 2: b}\n', name="c.yaml")
@example(text='input\n"never closed\n', name="d.csv")
def test_any_text_loads_or_is_a_user_error(tmp_path: Path, text: str, name: str) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    if name == "tests.csv":
        path = tmp_path / "c.yaml"
        path.write_text("prompts: ['{{input}}']\ntests: file://tests.csv\n", encoding="utf-8")
    _loads_or_refuses(path, "promptfoo" if name.endswith("yaml") else "inspect")


@pytest.mark.parametrize("name", ["d.jsonl", "d.json"])
def test_an_inspect_sample_ending_with_the_assistant_is_one_line(tmp_path: Path, name: str) -> None:
    """Issue 46.2: a question's last turn is the user's (the solver answers it); a sample whose chat ends with
    the assistant gave a raw pydantic error when the reader's own check was mutated away. One line naming the
    file, the sample's line and the field, exit 2."""
    ok = {"input": "Hi"}
    bad = {"input": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}]}
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(r) for r in (ok, bad)) + "\n" if name.endswith("l") else
                    "[\n" + ",\n".join(json.dumps(r) for r in (ok, bad)) + "\n]\n", encoding="utf-8")
    result = runner.invoke(app, ["run", "--data", str(path), "--format", "inspect", "--runs-root",
                                 str(tmp_path / "runs")])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    line = 2 if name.endswith("l") else 3  # the JSON array's "[" is line 1
    assert f"{name}, line {line}, field 'input': the last message must be the user's" in said, said
    assert said.count("error:") == 1 and "validation error" not in said and "Traceback" not in said
    assert not (tmp_path / "runs").exists()


def test_the_size_bound_is_a_positive_number_and_a_blank_csv_line_is_no_sample(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = tmp_path / "d.csv"
    data.write_text("input,target\nIs it fine?,Yes\n\nShould I rest?,Rest\n", encoding="utf-8")
    assert [q.turns[-1].content for q in read_imported(data, "inspect").questions] == ["Is it fine?", "Should I rest?"]
    for raw in ("0", "-1", "nan", "lots"):
        monkeypatch.setenv("DECOEVO_IMPORT_MAX_MB", raw)
        with pytest.raises(ConfigError, match="must be a positive number of megabytes"):
            read_imported(data, "inspect")


def test_a_value_nested_within_the_bound_is_kept(tmp_path: Path) -> None:
    deep: Any = "x"
    for _ in range(40):  # within the bound of 64 levels
        deep = {"k": deep}
    config = tmp_path / "p.json"
    config.write_text(json.dumps({"prompts": ["{{query}}"], "tests": [{"vars": {"query": "a", "deep": deep}}]}))
    (q,) = read_imported(config, "promptfoo").questions
    assert q.meta["promptfoo"]["vars"]["deep"] == deep


def test_a_test_nested_64_levels_deep_is_kept_and_one_level_more_is_refused(tmp_path: Path) -> None:
    """Issue 46.2: the bound is "more than 64 levels deep", counted from the test (the test 0, its `vars` 1, a
    variable 2): a value 64 levels in is kept whole, 65 is refused naming the field. With `>=` for `>` the 64th
    level was refused too."""
    def config(levels: int) -> Path:
        deep: Any = "x"
        for _ in range(levels - 2):  # the variable's own level and `vars` above it
            deep = {"k": deep}
        path = tmp_path / f"p{levels}.json"
        path.write_text(json.dumps({"prompts": ["{{query}}"], "tests": [{"vars": {"query": "a", "deep": deep}}]}))
        return path

    (q,) = read_imported(config(64), "promptfoo").questions
    assert json.dumps(q.meta["promptfoo"]["vars"]["deep"]).count("{") == 62
    with pytest.raises(DatasetError, match=r"field 'tests\[0\]\.vars\.deep(\.k){63}': is nested more than 64 levels"):
        read_imported(config(65), "promptfoo")


# the assertion types promptfoo's CSV reader (assertionFromString) knows, written out: what decoevo must read
PROMPTFOO_CSV_TYPES = (
    "llm-rubric", "javascript", "python", "contains", "icontains", "contains-any", "contains-all", "icontains-any",
    "icontains-all", "equals", "regex", "starts-with", "is-json", "contains-json", "is-sql", "contains-sql",
    "is-xml", "contains-xml", "is-valid-openai-tools-call", "is-valid-openai-function-call", "similar",
    "levenshtein", "rouge-n", "bleu", "meteor", "gleu", "model-graded-closedqa", "factuality", "answer-relevance",
    "context-recall", "context-relevance", "context-faithfulness", "g-eval", "classifier", "moderation",
    "perplexity", "perplexity-score", "cost", "latency", "webhook", "select-best", "word-count",
)


def test_every_csv_assertion_prefix_promptfoo_knows_is_read_as_its_type(tmp_path: Path) -> None:
    """An `__expected` cell `TYPE: value` (or `TYPE(threshold): value`) is an assertion of that type for every type
    promptfoo's CSV reader knows; text without a known prefix is an `equals`."""
    types = sorted(PROMPTFOO_CSV_TYPES)
    cells = ",".join(f'"{t}: v"' for t in types)
    (tmp_path / "tests.csv").write_text(
        "query," + ",".join(f"__expected{i + 1}" for i in range(len(types))) + f'\n"Knee pain?",{cells}\n',
        encoding="utf-8")
    path = tmp_path / "c.yaml"
    path.write_text("prompts: ['{{query}}']\ntests: file://tests.csv\n", encoding="utf-8")
    (q,) = read_imported(path, "promptfoo").questions
    assert [a["type"] for a in q.meta["promptfoo"]["assert"]] == types


def test_a_jsonl_tests_file_is_read_line_by_line_and_a_blank_line_is_no_test(tmp_path: Path) -> None:
    """Issue 46.2: `tests: file://tests.jsonl`, one test a line, blank lines skipped (promptfoo's own reading);
    each test is named by its own line in the account."""
    rows = [{"vars": {"query": "Knee pain?"}, "assert": [{"type": "llm-rubric", "value": "Suggests rest"}]},
            {"description": "length", "vars": {"query": "Run through it?"},
             "assert": [{"type": "javascript", "value": "output.length < 900"}]}]
    (tmp_path / "tests.jsonl").write_text(f"{json.dumps(rows[0])}\n\n{json.dumps(rows[1])}\n", encoding="utf-8")
    path = tmp_path / "c.yaml"
    path.write_text("prompts: ['{{query}}']\ntests: file://tests.jsonl\n", encoding="utf-8")
    got = read_imported(path, "promptfoo")
    assert [q.as_text() for q in got.questions] == ["Knee pain?", "Run through it?"]
    assert "1 tests have only assertions decoevo does not use: t002 (tests.jsonl:3 'length')" in got.account()


def test_a_credential_in_a_test_and_one_in_the_providers_are_both_counted(tmp_path: Path) -> None:
    """Issue 46.2: the account says how many keys written in the file were left out, those of every test and
    those of the config's providers together (neither is kept)."""
    test = {"vars": {"query": "Knee pain?"}, "assert": [{"type": "llm-rubric", "value": "Suggests rest"}],
            "options": {"provider": {"id": "openai:chat:m", "config": {"apiKey": KEY}}}}
    got = read_imported(_write(tmp_path, _config([test], PROVIDERS)), "promptfoo")
    assert ("2 credential(s) written in the file (apiKey, ...) are not kept: decoevo never copies a key; it reads "
            "keys from environment variables") in got.account()
    assert KEY not in got.jsonl() and KEY not in json.dumps(got.kept)
