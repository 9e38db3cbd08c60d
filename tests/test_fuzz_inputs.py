"""Property-based fuzzing of what users give decoevo: question files (every benchmark's loader), run
configurations (dicts and YAML files) and `--set`. The property: the input is accepted, or refused with
a `UserError` whose message is one line naming the file or key (the CLI's exit 2); never any other
exception (a traceback).

Inputs are mostly mutations of a valid record or configuration (a field replaced by any JSON/YAML
value, deleted, or a stray one added), so that the fuzzing reaches past the first check; some are raw
text and bytes. Example counts are small for the default suite (DECOEVO_FUZZ_EXAMPLES raises them).
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from decoevo.cli.boundary import describe
from decoevo.domain import Question
from decoevo.engine.config import DataConfig, config_from_dict
from decoevo.errors import UserError
from decoevo.tasks.load import load_questions
from decoevo.userfiles import load_yaml_mapping

EXAMPLES = int(os.environ.get("DECOEVO_FUZZ_EXAMPLES", "150"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])
FUZZ_SLOW = settings(FUZZ, max_examples=max(1, EXAMPLES // 2))  # a CLI invocation or a YAML parse per example

ODD_TEXT = st.sampled_from(["", " ", "\ud800", "x\udfff", "\ufeff", "\u2028", "\x00", "\n", "None", "True",
                            "1e999", "-0", "NaN", "é" * 3, "../x", "/abs", "{", "[1"])
SCALARS = (st.none() | st.booleans() | st.integers(min_value=-(10**20), max_value=10**20)
           | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12) | ODD_TEXT)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=6) | ODD_TEXT, inner, max_size=3), max_leaves=8)


def similar(draw: Any, value: Any) -> Any:
    """A value of the same type (so that more mutations get past the type checks to the later ones)."""
    if isinstance(value, bool):
        return draw(st.booleans())
    if isinstance(value, int):
        return draw(st.integers(-3, 10**7) | st.sampled_from([0, -1, 10**6, 10**6 + 1]))
    if isinstance(value, float):
        return draw(st.floats(allow_nan=True, allow_infinity=True))
    if isinstance(value, str):
        return draw(st.text(max_size=12) | ODD_TEXT | st.sampled_from(["user", "assistant", "system", "weighted"]))
    return draw(JSON)


def mutate(draw: Any, node: Any, depth: int = 0) -> Any:
    """One random change somewhere in `node`: replace a value (by any value or one of the same type),
    delete or add a key, or go deeper."""
    if isinstance(node, dict) and node and depth < 6:
        key = draw(st.sampled_from(sorted(node, key=str)))
        op = draw(st.sampled_from(["deeper", "deeper", "similar", "replace", "delete", "add"]))
        out = dict(node)
        if op == "deeper":
            out[key] = mutate(draw, node[key], depth + 1)
        elif op == "similar":
            out[key] = similar(draw, node[key])
        elif op == "replace":
            out[key] = draw(JSON)
        elif op == "delete":
            del out[key]
        else:
            out[draw(st.text(max_size=8) | ODD_TEXT)] = draw(JSON)
        return out
    if isinstance(node, list) and node and depth < 6:
        i = draw(st.integers(0, len(node) - 1))
        op = draw(st.sampled_from(["deeper", "deeper", "similar", "replace", "delete", "append"]))
        out = list(node)
        if op == "deeper":
            out[i] = mutate(draw, node[i], depth + 1)
        elif op == "similar":
            out[i] = similar(draw, node[i])
        elif op == "replace":
            out[i] = draw(JSON)
        elif op == "delete":
            del out[i]
        else:
            out.append(draw(JSON))
        return out
    return similar(draw, node) if draw(st.booleans()) else draw(JSON)


@st.composite
def mutated(draw: Any, template: Any) -> Any:
    obj = copy.deepcopy(template)
    for _ in range(draw(st.integers(1, 3))):
        obj = mutate(draw, obj)
    return obj


def accepted_or_one_line(fn: Any, *names: str) -> Any:
    """Run `fn`: a result, or a UserError that the CLI prints as one line (exit 2) naming one of `names`."""
    try:
        result = fn()
        event("accepted")  # --hypothesis-show-statistics shows how much of the fuzzing got through
        return result
    except UserError as exc:
        event("refused")
        failure = describe(exc)
        message = failure.message
        assert failure.code == 2
        assert message.strip() and "\n" not in message and "\r" not in message, repr(message)
        assert any(name in message for name in names), f"{names} not in {message!r}"
        return None


# ---- question files ------------------------------------------------------------------------------------
HB = {"prompt_id": "h1", "prompt": [{"role": "user", "content": "hi"}],
      "rubrics": [{"criterion": "greets", "points": 1, "tags": ["axis:x"]}, {"criterion": "rude", "points": -2}]}
JSONL_FORMATS = {
    "jsonl": {"id": "a", "prompt": "How do I sleep better?", "task": "generic",
              "gold": {"scheme": "weighted", "items": [{"text": "t", "points": 2}, {"text": "u", "points": -1}]}},
    "healthbench": HB,
    "writingbench": {"index": 1, "query": "Write a memo.", "domain1": "d",
                     "checklist": [{"name": "n", "criteria_description": "d", "1-2": "bad"}]},
    "researchqa": {"id": "r1", "query": "Why?", "rubric": [{"rubric_item": "explains", "type": "Core"}]},
}
JSON_FORMATS = {
    "scholarqa_cs": [{"case_id": "c1", "initial_prompt": "What is RAG?", "metric_config": {"name": "m", "config": {
        "other_properties": [{"name": "most_important_item_0", "criterion": "defines it", "weight": 1,
                              "evidence": ["e"]}]}}}],
    "llmeval_med": {"知识": [{"problem": "头痛怎么办", "sanswer": "休息", "checklist": "1. 休息", "round": 1,
                             "groupCode": 3}]},
}


def load(tmp: Path, fmt: str, content: bytes) -> list[Question] | None:
    path = tmp / f"q.{fmt}"
    path.write_bytes(content)
    questions = accepted_or_one_line(lambda: load_questions(DataConfig(path=str(path), format=fmt)), str(path))
    if questions is not None:
        assert questions and all(isinstance(q, Question) and q.id for q in questions)
        assert len({q.id for q in questions}) == len(questions)
    return questions


def jsonl_bytes(records: list[Any], bom: bool) -> bytes:
    text = "".join(json.dumps(r) + "\n" for r in records)  # ASCII: surrogates arrive as \ud800 escapes
    return ("\ufeff" if bom else "").encode() + text.encode()


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("fmt", sorted(JSONL_FORMATS))
@FUZZ
@given(data=st.data(), bom=st.booleans())
def test_jsonl_loaders(tmp, fmt, data, bom):
    good = JSONL_FORMATS[fmt]
    bad = data.draw(mutated(good))
    load(tmp, fmt, jsonl_bytes([good, bad], bom))


@pytest.mark.parametrize("fmt", sorted(JSON_FORMATS))
@FUZZ
@given(data=st.data())
def test_json_document_loaders(tmp, fmt, data):
    load(tmp, fmt, json.dumps(data.draw(mutated(JSON_FORMATS[fmt]))).encode())


@FUZZ
@given(raw=st.binary(max_size=200) | st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
       fmt=st.sampled_from(sorted(JSONL_FORMATS) + sorted(JSON_FORMATS)))
def test_loaders_on_raw_bytes(tmp, raw, fmt):
    load(tmp, fmt, raw)


@FUZZ
@given(depth=st.integers(900, 200_000), kind=st.sampled_from(["[", '{"a":']))
def test_deep_nesting(tmp, depth, kind):
    closing = "]" if kind == "[" else "}"
    body = kind * depth + "1" + closing * depth
    load(tmp, "jsonl", f'{{"id": "a", "prompt": {body}}}\n'.encode())
    load(tmp, "llmeval_med", body.encode())


def test_eqbench_prompts_file(tmp):
    folder = tmp / "eq"
    folder.mkdir(exist_ok=True)
    (folder / "creative_writing_criteria.txt").write_text("Imagery\nPacing\n")
    (folder / "negative_criteria.txt").write_text("Pacing\n")
    good = {"7": {"writing_prompt": "A story: <SEED>", "seed_modifiers": ["storm", "calm"]}}

    @FUZZ
    @given(data=st.data())
    def check(data):
        prompts = folder / "creative_writing_prompts_v3.json"
        prompts.write_text(json.dumps(data.draw(mutated(good))))
        accepted_or_one_line(lambda: load_questions(DataConfig(path=str(folder), format="eqbench_cw")), str(folder))

    check()


# ---- run configurations ------------------------------------------------------------------------------------
CONFIG = {
    "method": "decoevo", "seed": 0, "data": {"path": "q.jsonl", "format": "jsonl", "limit": 5},
    "splits": {"train": 6, "probe": 2, "solver_gate": 3, "generator_gate": 3},
    "hyper": {"steps": 2, "epsilon": 0.01, "judge_mode": "joint", "max_criteria": 8},
    "lm": {"models": {"default": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                                  "max_retries": 0},
                      "grader": {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "g"}},
           "roles": {"judge": "grader"}, "use_cache": False},
    "budget": {"max_calls": 100},
}


@FUZZ
@given(data=st.data())
def test_config_from_dict(data):
    accepted_or_one_line(lambda: config_from_dict(data.draw(mutated(CONFIG)), source="run.yaml"), "run.yaml")


def set_at(tree: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(tree)
    node = out
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = value
    return out


INT_KEYS = [("seed",), ("hyper", "steps"), ("hyper", "batch_size"), ("hyper", "rollouts"), ("splits", "train"),
            ("budget", "max_calls"), ("data", "limit"), ("lm", "models", "default", "max_retries"),
            ("lm", "models", "grader", "max_concurrency"), ("lm", "max_repairs")]
FLOAT_KEYS = [("hyper", "epsilon"), ("hyper", "tau_tie"), ("budget", "max_cost"),
              ("lm", "models", "default", "timeout_s"), ("lm", "models", "default", "first_byte_timeout_s"),
              ("lm", "models", "default", "input_price_per_mtok"), ("lm", "models", "grader", "output_price_per_mtok"),
              ("lm", "models", "default", "requests_per_minute"), ("lm", "models", "default", "tokens_per_minute"),
              ("lm", "models", "default", "backoff_cap_s"), ("lm", "models", "default", "min_tokens_per_s")]


@FUZZ
@given(path=st.sampled_from(INT_KEYS), value=st.booleans() | st.floats() | st.text(max_size=4).filter(bool)
       | st.sampled_from(["3", "1e3", "0x10"]))
def test_a_count_takes_only_an_integer(path, value):
    """true is not 1 and 4.0 is not 4: a count given anything but an integer is refused, naming the key."""
    with pytest.raises(UserError) as caught:
        config_from_dict(set_at(CONFIG, path, value), source="run.yaml")
    assert path[-1] in str(caught.value) and "\n" not in str(caught.value)


@FUZZ
@given(path=st.sampled_from(FLOAT_KEYS), value=st.sampled_from([math.inf, -math.inf, math.nan]))
def test_non_finite_numbers_are_refused_everywhere(path, value):
    with pytest.raises(UserError) as caught:
        config_from_dict(set_at(CONFIG, path, value), source="run.yaml")
    assert path[-1] in str(caught.value)


@FUZZ_SLOW
@given(data=st.data())
def test_a_yaml_key_given_twice_is_named_with_its_line(tmp, data):
    lines = yaml.safe_dump(CONFIG, sort_keys=False).splitlines()
    keyed = [i for i, line in enumerate(lines) if re.match(r"^\s*[A-Za-z_]+:", line)]
    i = data.draw(st.sampled_from(keyed))
    key = lines[i].split(":")[0].strip()
    value = data.draw(st.sampled_from(["", " 1", " x", " [1]", " {a: 1}", " .inf", " true"]))
    indent = len(lines[i]) - len(lines[i].lstrip())
    end = next((j for j in range(i + 1, len(lines)) if len(lines[j]) - len(lines[j].lstrip()) <= indent), len(lines))
    doubled = [*lines[:end], f"{lines[i].split(':')[0]}:{value}", *lines[end:]]  # after the key's whole block
    path = tmp / "dup.yaml"
    path.write_text("\n".join(doubled) + "\n", encoding="utf-8")
    with pytest.raises(UserError) as caught:
        load_yaml_mapping(path)
    assert f"line {end + 1}: the key '{key}' is given twice" in str(caught.value), str(caught.value)
    assert f"first on line {i + 1}" in str(caught.value)


@FUZZ
@given(role=st.sampled_from(["user", "system"]), blank=st.text(" \t\n\r\u3000", max_size=3),
       at=st.integers(0, 2))
def test_a_blank_chat_turn_is_refused_naming_it(tmp, role, blank, at):
    turns = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]
    turns.insert(at, {"role": role, "content": blank})
    path = tmp / "turns.jsonl"
    path.write_text(json.dumps({"id": "q", "prompt": turns}) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match=rf"prompt\[{at}\]\.content': is empty"):
        load_questions(DataConfig(path=str(path)))


YAML_SNIPPETS = st.sampled_from([
    "hyper: [1", "hyper:\n\tsteps: 2", "!!python/object/apply:os.system ['true']", "a: &x [*x]", "- 1\n- 2",
    "method: decoevo\n" * 2, "seed: 1e999", "seed: .nan", "'", "hyper: {steps: 2", "\ufeffmethod: decoevo",
    "lm: {models: {}}", "? [a]\n: 1", "data: null", "%YAML 9.9\n---\na: 1", "a: !!binary AAA", "[" * 1100,
    'initial_solver_skill: "\\ud800"', 'hyper: {"\\udfff": 1}', "hyper: &h {steps: *h}",
])


@FUZZ_SLOW
@given(text=st.text(max_size=120) | YAML_SNIPPETS | st.builds(lambda a, b: a + "\n" + b, YAML_SNIPPETS, YAML_SNIPPETS),
       encoding=st.sampled_from(["utf-8", "utf-16", "latin-1"]))
def test_yaml_config_files(tmp, text, encoding):
    path = tmp / "run.yaml"
    try:
        path.write_bytes(text.encode(encoding))
    except UnicodeEncodeError:
        path.write_bytes(text.encode("utf-8", "surrogatepass"))
    raw = accepted_or_one_line(lambda: load_yaml_mapping(path), str(path))
    if raw is not None:
        accepted_or_one_line(lambda: config_from_dict({**CONFIG, **raw}, source=str(path)), str(path))


# ---- --set through the command line (the run itself is not started: that is tested elsewhere) ---------------
KEYS = st.sampled_from(["hyper.steps", "hyper.epsilon", "hyper", "splits.train", "splits", "seed", "method",
                        "data.format", "data", "budget.max_calls", "lm.models.default.max_retries", "lm.roles.judge",
                        "lm.models", "lm", "a", "a.b", "hyper.steps.x", "", ".", "..", "x..y", " hyper.steps"])
VALUES = st.text(max_size=20) | YAML_SNIPPETS | st.sampled_from(["[1", "{a: 1}", "3", "-1", "0.5", "null", "~",
                                                                  "[1, 2]", "{steps: 2}", "\t", "1e999", "ε"])


@FUZZ_SLOW
@given(items=st.lists(st.builds(lambda k, v, eq: f"{k}{'=' if eq else ''}{v}", KEYS | st.text(max_size=10),
                                VALUES, st.booleans()), min_size=1, max_size=4))
def test_set_flags(tmp, items, monkeypatch_module):
    from decoevo.cli import app

    data = tmp / "toy.jsonl"
    if not data.exists():
        from decoevo.testing.toy_server import write_toy_questions
        write_toy_questions(data)
    args = ["run", "--data", str(data), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
            "--runs-root", str(tmp / "runs")]
    for item in items:
        args += ["--set", item]
    result = CliRunner().invoke(app, args)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    assert result.exit_code in (0, 2), result.output
    event("accepted" if result.exit_code == 0 else "refused")
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        message = result.output[result.output.index("error:"):]
        assert "\n\n" not in message.strip(), result.output


@pytest.fixture(scope="module")
def monkeypatch_module():
    """`decoevo run` stops just before the run starts: --set parsing and validation are what is fuzzed."""
    import decoevo.cli.run

    mp = pytest.MonkeyPatch()
    mp.setattr(decoevo.cli.run, "_execute", lambda config, run_dir, resume, accept_changed_data=False: None)
    yield mp
    mp.undo()
