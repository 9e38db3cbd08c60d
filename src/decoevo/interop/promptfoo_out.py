"""A run as a promptfoo config that `promptfoo eval` runs as is.

DIR/promptfooconfig.yaml   prompts (shipped and initial skill, so `promptfoo view` shows both side by side),
                           the run's endpoint as provider, the grader, and the tests
DIR/prompts/shipped.json, DIR/prompts/initial.json   chat prompts: decoevo's solve system message, the question
DIR/tests.yaml             one test per question: its text, and its rubric as weighted `llm-rubric` assertions
                           (an imported promptfoo test keeps its own variables and assertions beside them)
DIR/judge_prompt.json      the grader's prompt: decoevo's per-criterion judge prompt

Every text a model, a question file or a path supplies is written as data (promptfoo_text.py): a skill, a
criterion, a question reach the model byte for byte, and none can become a template, a file load or a key.
Endpoint fields are checked when the bundle is made (bundle.Endpoint); nothing else is interpolated.

The grader is the run's judge endpoint called the way decoevo's judge calls it (its prompt, its JSON schema sent
as decoevo negotiated with that endpoint, temperature 0, the run's seed); promptfoo's `http` provider maps the
verdict level (0-4) to the score promptfoo reads (level / 4; pass at level 3 or more). A test's score is
promptfoo's weighted mean of its assertions' scores, which is decoevo's S = Σ w·e / Σ w over the co-evolved
rubric; a test passes when S reaches its threshold (default 0.75, `--threshold`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from ..domain import Question
from ..lm.endpoint import schema_instruction, server_schema
from ..lm.structured import schema_for
from ..roles.common import MARGIN, data_block, one_line
from ..roles.judge import SYSTEM as JUDGE_SYSTEM
from ..roles.judge import CriterionVerdict
from .bundle import Bundle, solver_system
from .outdir import OutDir, json_text
from .promptfoo_text import display_text, template_text, var_ref, var_value

#: the promptfoo release these configs are written for and tested with (tools/versions.env agrees: a test)
PROMPTFOO_VERSION = "0.121.20"
QUESTION_VAR = "question"
JUDGE_QUESTION_VAR = "decoevo_judge_question"  # the question as decoevo's judge quotes it (roles/common.py)
LOOPBACK = ("127.0.0.1", "localhost", "::1")
PASS_LEVEL = 3  # "mostly met": an assertion passes from here; the score is the level / 4 either way
# a test passes when its weighted score S reaches this (promptfoo's test `threshold`); without one, promptfoo
# would fail a test on any one criterion below "mostly met"
DEFAULT_THRESHOLD = PASS_LEVEL / 4
RUBRIC_MARK = "decoevo"  # an assertion's metadata.source: the co-evolved rubric, beside the user's own

# the verdict (decoevo's CriterionVerdict) as the {reason, score, pass} promptfoo's llm-rubric reads
VERDICT_TRANSFORM = ("(json) => { const v = JSON.parse(json.choices[0].message.content); return "
                     f"{{ output: {{ reason: v.rationale, score: v.level / 4, pass: v.level >= {PASS_LEVEL} }} }}; }}")


def chat_prompt(system: str) -> str:
    return json_text([{"role": "system", "content": template_text(system)},
                      {"role": "user", "content": var_ref(QUESTION_VAR)}])


def judge_system(bundle: Bundle) -> str:
    """decoevo's judge system message, with the schema in it when the endpoint takes no response_format."""
    if bundle.judge.profile.structured == "none":
        return f"{JUDGE_SYSTEM}\n\n{schema_instruction(server_schema(schema_for(CriterionVerdict)))}"
    return JUDGE_SYSTEM


def judge_prompt(bundle: Bundle) -> str:
    """decoevo's per-criterion judge prompt (roles/judge.py) with promptfoo's variables: the question as
    decoevo quotes it (a test variable), the reply quoted line by line behind the margin of decoevo's data
    blocks, and `rubric`, the criterion (written one line, as decoevo's judge shows it)."""
    response = f"<response>\n{MARGIN}{{{{ output | replace(\"\\n\", \"\\n{MARGIN}\") }}}}\n</response>"
    user = (f"{var_ref(JUDGE_QUESTION_VAR)}\n\n{response}\n\n"
            "Criterion: {{ rubric }}\n\nReturn JSON with the fields rationale and level.")
    return json_text([{"role": "system", "content": template_text(judge_system(bundle))},
                      {"role": "user", "content": user}])


def _openai_provider(bundle: Bundle) -> dict[str, Any]:
    e = bundle.solver
    config: dict[str, Any] = {"apiBaseUrl": e.base_url, "apiKeyEnvar": e.api_key_env, "temperature": 0,
                              "max_tokens": bundle.max_tokens_solve, "seed": bundle.seed}
    if urlsplit(e.base_url).hostname in LOOPBACK:  # a local server takes no key, as decoevo sends none
        config["apiKeyRequired"] = False
    return {"id": f"openai:chat:{e.model}", "label": e.model, "config": config}


def grader_body(bundle: Bundle) -> dict[str, Any]:
    """The judge request as decoevo's backend writes it for this endpoint (lm/openai_backend.py)."""
    e = bundle.judge
    body: dict[str, Any] = {"model": e.model, "messages": "{{ prompt }}"}
    if e.profile.temperature:
        body["temperature"] = 0
    body[e.profile.token_param] = bundle.max_tokens_judge
    body["seed"] = bundle.seed
    schema = server_schema(schema_for(CriterionVerdict))
    mode = e.profile.structured or "json_schema"
    if mode == "json_object":  # llama.cpp's server: a 500 for json_schema, a grammar from this
        body["response_format"] = {"type": "json_object", "schema": schema}
    elif mode == "json_schema":
        body["response_format"] = {"type": "json_schema",
                                   "json_schema": {"name": "output", "schema": schema, "strict": False}}
    return body


def grader_provider(bundle: Bundle) -> dict[str, Any]:
    e = bundle.judge
    # the key by its variable's name, a checked identifier (bundle.Endpoint); empty for a local server
    headers = {"Content-Type": "application/json", "Authorization": "Bearer {{ env." + e.api_key_env + " }}"}
    return {"id": "http", "label": f"decoevo judge ({e.model})",
            "config": {"url": f"{e.base_url}/chat/completions", "method": "POST", "headers": headers,
                       "body": grader_body(bundle), "transformResponse": VERDICT_TRANSFORM}}


def _rubric_asserts(bundle: Bundle, q: Question) -> list[dict[str, Any]]:
    rubric = bundle.rubrics[q.id]
    return [{"type": "llm-rubric", "value": template_text(one_line(c.text)), "weight": c.weight,
             "metadata": {"source": RUBRIC_MARK, "generator_version": rubric.generator_version}}
            for c in rubric.criteria]


def _own_test(q: Question) -> dict[str, Any]:
    """What an imported promptfoo test held besides its question (interop/promptfoo_in.py keeps it verbatim)."""
    found = q.meta.get("promptfoo")
    return found if isinstance(found, dict) else {}


def tests(bundle: Bundle, threshold: float = DEFAULT_THRESHOLD) -> list[dict[str, Any]]:
    """One test per question: an imported test as the user wrote it (its variables, assertions and other fields,
    written back as they were: they are the user's own config), with decoevo's question and the co-evolved rubric
    added beside them."""
    out = []
    for q in bundle.questions:
        own = _own_test(q)
        test: dict[str, Any] = {k: v for k, v in own.items()
                                if k not in ("question_var", "vars", "assert", "description", "metadata")}
        description = own.get("description")
        variables: dict[str, Any] = dict(own["vars"]) if isinstance(own.get("vars"), dict) else {}
        qvar = own.get("question_var")
        if isinstance(qvar, str) and qvar and qvar != QUESTION_VAR:
            variables[qvar] = q.as_text()  # the user's own variable, as their config held it, for their assertions
        variables.update({QUESTION_VAR: var_value(q.as_text()),
                          JUDGE_QUESTION_VAR: var_value(data_block("question", q.as_text()))})
        user_asserts = list(own["assert"]) if isinstance(own.get("assert"), list) else []
        metadata = dict(own["metadata"]) if isinstance(own.get("metadata"), dict) else {}
        test.update({
            "description": display_text(description if isinstance(description, str) and description else q.id),
            "vars": variables,
            "assert": [*user_asserts, *_rubric_asserts(bundle, q)],
            "metadata": {**metadata, "decoevo_question_id": display_text(q.id),
                         "generator_version": bundle.rubrics[q.id].generator_version},
        })
        test.setdefault("threshold", threshold)
        out.append(test)
    return out


def default_test(bundle: Bundle, user_default: dict[str, Any] | None) -> dict[str, Any]:
    """The config's defaultTest: the user's own (its assertions, variables and options, as they wrote them)
    with decoevo's grader and judge prompt as its options."""
    out: dict[str, Any] = dict(user_default or {})
    options = dict(out["options"]) if isinstance(out.get("options"), dict) else {}
    # disableVarExpansion: a variable is one value, never a list or a glob of files to expand
    options.update({"provider": grader_provider(bundle), "rubricPrompt": "file://judge_prompt.json",
                    "disableVarExpansion": True})
    out["options"] = options
    return out


def config(bundle: Bundle, user_default: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "description": f"decoevo export: shipped solver skill v{bundle.shipped.version:03d} vs initial, rubrics "
                       f"from generator v{bundle.generator.version:03d}",
        "prompts": [{"id": "file://prompts/shipped.json", "label": f"shipped (solver v{bundle.shipped.version:03d})"},
                    {"id": "file://prompts/initial.json", "label": "initial (solver v000)"}],
        "providers": [_openai_provider(bundle)],
        "defaultTest": default_test(bundle, user_default),
        "tests": "file://tests.yaml",
    }


def header(bundle: Bundle) -> str:
    """The config's opening comment: fixed text, the pinned version and a checked identifier (bundle.py)."""
    key = ("a local server takes no key" if urlsplit(bundle.solver.base_url).hostname in LOOPBACK
           else f"its key is read from ${bundle.solver.api_key_env}")
    return ("# Written by `decoevo export --to promptfoo` (the run, its versions, the endpoint: decoevo-export.json).\n"
            f"# Run it in this folder: `npx promptfoo@{PROMPTFOO_VERSION} eval`, then "
            f"`npx promptfoo@{PROMPTFOO_VERSION} view`.\n# The provider and the grader are the run's endpoint; {key}.\n"
            "# Assertions with metadata.source: decoevo are the co-evolved rubric (scored 0-1: level / 4).\n")


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=1000)


def write_promptfoo(bundle: Bundle, out: OutDir, threshold: float = DEFAULT_THRESHOLD, *,
                    user_default: dict[str, Any] | None = None) -> list[Path]:
    """Write the config and its files under `out`; returns the paths written. `user_default`: the imported
    config's own defaultTest, kept (its assertions run on every test, beside the co-evolved rubric)."""
    return out.write({
        "prompts/shipped.json": chat_prompt(solver_system(bundle.shipped)),
        "prompts/initial.json": chat_prompt(solver_system(bundle.initial)),
        "judge_prompt.json": judge_prompt(bundle),
        "tests.yaml": _yaml(tests(bundle, threshold)),
        "promptfooconfig.yaml": header(bundle) + _yaml(config(bundle, user_default)),
    })
