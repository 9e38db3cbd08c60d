"""A run as a promptfoo config that `promptfoo eval` runs as is.

DIR/promptfooconfig.yaml   prompts (shipped and initial skill, so `promptfoo view` shows both side by side),
                           the run's endpoint as provider, the grader, and the tests
DIR/prompts/shipped.json, DIR/prompts/initial.json   chat prompts: decoevo's solve system message, {{question}}
DIR/tests.yaml             one test per question: its text, and its rubric as weighted `llm-rubric` assertions
DIR/judge_prompt.json      the grader's prompt: decoevo's per-criterion judge prompt

The grader is the run's judge endpoint called the way decoevo's judge calls it (its prompt, its JSON schema,
temperature 0, the run's seed); promptfoo's `http` provider maps the verdict level (0-4) to the score
promptfoo reads (level / 4; pass at level 3 or more). A test's score is promptfoo's weighted mean of its
assertions' scores, which is decoevo's S = Σ w·e / Σ w; a test passes when S reaches its threshold
(default 0.75, `--threshold`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from ..fileio import atomic_write_text
from ..roles.common import MARGIN, one_line
from ..roles.judge import SYSTEM as JUDGE_SYSTEM
from ..roles.judge import CriterionVerdict
from .bundle import Bundle, solver_system

QUESTION_VAR = "question"
LOOPBACK = ("127.0.0.1", "localhost", "::1")
PASS_LEVEL = 3  # "mostly met": an assertion passes from here; the score is the level / 4 either way
# a test passes when its weighted score S reaches this (promptfoo's test `threshold`); without one, promptfoo
# would fail a test on any one criterion below "mostly met"
DEFAULT_THRESHOLD = PASS_LEVEL / 4

# the verdict (decoevo's CriterionVerdict) as the {reason, score, pass} promptfoo's llm-rubric reads
VERDICT_TRANSFORM = ("(json) => { const v = JSON.parse(json.choices[0].message.content); return "
                     f"{{ output: {{ reason: v.rationale, score: v.level / 4, pass: v.level >= {PASS_LEVEL} }} }}; }}")


def _raw(text: str) -> str:
    """Text promptfoo renders as a template (nunjucks) kept literal."""
    return f"{{% raw %}}{text}{{% endraw %}}" if ("{{" in text or "{%" in text or "{#" in text) else text


def chat_prompt(system: str) -> str:
    return json.dumps([{"role": "system", "content": _raw(system)},
                       {"role": "user", "content": "{{ " + QUESTION_VAR + " }}"}], ensure_ascii=False, indent=2)


def _quoted(tag: str, var: str) -> str:
    """A data block of roles/common.py written as a promptfoo template: every line of `var` behind the margin."""
    return f"<{tag}>\n{MARGIN}{{{{ {var} | replace(\"\\n\", \"\\n{MARGIN}\") }}}}\n</{tag}>"


def judge_prompt() -> str:
    """decoevo's per-criterion judge prompt (roles/judge.py) with promptfoo's variables: the question and
    the reply are quoted line by line behind the margin of decoevo's data blocks, and `rubric` is the
    criterion."""
    user = (f"{_quoted('question', QUESTION_VAR)}\n\n{_quoted('response', 'output')}\n\n"
            "Criterion: {{ rubric }}\n\nReturn JSON with the fields rationale and level.")
    return json.dumps([{"role": "system", "content": _raw(JUDGE_SYSTEM)}, {"role": "user", "content": user}],
                      ensure_ascii=False, indent=2)


def _openai_provider(bundle: Bundle) -> dict[str, Any]:
    e = bundle.solver
    config: dict[str, Any] = {"apiBaseUrl": e.base_url, "apiKeyEnvar": e.api_key_env, "temperature": 0,
                              "max_tokens": bundle.max_tokens_solve, "seed": bundle.seed}
    if urlsplit(e.base_url).hostname in LOOPBACK:  # a local server takes no key, as decoevo sends none
        config["apiKeyRequired"] = False
    return {"id": f"openai:chat:{e.model}", "label": e.model, "config": config}


def grader_provider(bundle: Bundle) -> dict[str, Any]:
    e = bundle.judge
    schema = CriterionVerdict.model_json_schema()
    return {"id": "http", "label": f"decoevo judge ({e.model})",
            "config": {"url": f"{e.base_url}/chat/completions", "method": "POST",
                       "headers": {"Content-Type": "application/json",
                                   "Authorization": "Bearer {{ env." + e.api_key_env + " }}"},
                       "body": {"model": e.model, "messages": "{{ prompt }}", "temperature": 0,
                                "max_tokens": bundle.max_tokens_judge, "seed": bundle.seed,
                                "response_format": {"type": "json_schema", "json_schema": {
                                    "name": schema["title"], "schema": schema, "strict": True}}},
                       "transformResponse": VERDICT_TRANSFORM}}


def tests(bundle: Bundle, threshold: float = DEFAULT_THRESHOLD) -> list[dict[str, Any]]:
    out = []
    for q in bundle.questions:
        rubric = bundle.rubrics[q.id]
        out.append({
            "description": str(q.meta.get("promptfoo", {}).get("description") or q.id),
            "vars": {QUESTION_VAR: q.as_text()},
            "assert": [{"type": "llm-rubric", "value": _raw(one_line(c.text)), "weight": c.weight}
                       for c in rubric.criteria],
            "threshold": threshold,
            "metadata": {"decoevo_question_id": q.id, "generator_version": rubric.generator_version},
        })
    return out


def config(bundle: Bundle) -> dict[str, Any]:
    return {
        "description": f"decoevo run {Path(bundle.run).name}: shipped solver skill v{bundle.shipped.version:03d} "
                       f"vs initial, rubrics from generator v{bundle.generator.version:03d}",
        "prompts": [{"id": "file://prompts/shipped.json", "label": f"shipped (solver v{bundle.shipped.version:03d})"},
                    {"id": "file://prompts/initial.json", "label": "initial (solver v000)"}],
        "providers": [_openai_provider(bundle)],
        "defaultTest": {"options": {"provider": grader_provider(bundle), "rubricPrompt": "file://judge_prompt.json"}},
        "tests": "file://tests.yaml",
    }


HEADER = ("# Written by `decoevo export {run} --to promptfoo`. Run it as is: `npx promptfoo eval -c {cfg}`, then\n"
          "# `npx promptfoo view`. The provider and the grader are the run's endpoint; its key is read from ${key}.\n")


def write_promptfoo(bundle: Bundle, out: Path, threshold: float = DEFAULT_THRESHOLD) -> list[Path]:
    """Write the config and its files under `out` (made if missing); returns the paths written."""
    (out / "prompts").mkdir(parents=True, exist_ok=True)
    files = {
        out / "prompts" / "shipped.json": chat_prompt(solver_system(bundle.shipped)) + "\n",
        out / "prompts" / "initial.json": chat_prompt(solver_system(bundle.initial)) + "\n",
        out / "judge_prompt.json": judge_prompt() + "\n",
        out / "tests.yaml": yaml.safe_dump(tests(bundle, threshold), sort_keys=False, allow_unicode=True, width=1000),
        out / "promptfooconfig.yaml": HEADER.format(run=bundle.run, cfg=out / "promptfooconfig.yaml",
                                                    key=bundle.solver.api_key_env)
        + yaml.safe_dump(config(bundle), sort_keys=False, allow_unicode=True, width=1000),
    }
    for path, text in files.items():
        atomic_write_text(path, text)
    return list(files)
