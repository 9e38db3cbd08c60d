"""A promptfoo config read as decoevo's inputs.

- `tests` (inline, or `file://` YAML/JSON/JSONL/CSV files beside the config): one question per test, the
  value of the variable that holds the question (`--question-var`, else found: the one variable the prompt
  uses, or the one every test has);
- the first prompt: the initial solver skill (a chat prompt's system message, or a text prompt with the
  question's placeholder taken out);
- `llm-rubric` assertions (the tests' and `defaultTest`'s): the task specification's requirements, and each
  test's own as its weighted gold rubric (`not-llm-rubric`: negative points), which `decoevo eval` grades;
- `providers:` the model decoevo calls when the user names none (promptfoo_model.py).
Everything else is counted in the Imported's summary (per assertion type: what became what, what promptfoo
runs and decoevo cannot) and kept verbatim for an export to write back: each test's assertions, other vars
and fields in its question's `meta["promptfoo"]`, the config's `providers` and `defaultTest` in `kept`.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from ..domain import GoldItem, GoldRubric, Question, Turn
from ..errors import DatasetError
from .imported import Imported, ImportSummary, Use
from .importfiles import csv_records, plain, read_import_text, without_secrets
from .promptfoo_model import imported_model
from .yamllines import line_of, load_yaml_lined

VAR = re.compile(r"\{\{\s*([A-Za-z_][\w]*)\s*(?:\|[^}]*)?\}\}")
COMMON_NAMES = ("question", "query", "input", "prompt", "message", "user_input", "request")
RUBRIC_TYPES = {"llm-rubric": 1.0, "not-llm-rubric": -1.0}
MAX_SPEC_ITEMS = 40
READ_FIELDS = ("vars", "assert", "description", "metadata")  # what the account does not list as unused
KEPT_CONFIG = ("description", "providers", "defaultTest")  # written back by an export
# promptfoo's CSV `__expected` prefixes (assertionFromString): the types it knows, and its short names
CSV_ASSERT = re.compile(r"(not-)?([a-z][a-z0-9-]*)(?:\((\d+(?:\.\d+)?)\))?:(.*)\Z", re.DOTALL)
CSV_ALIASES = {"grade": "llm-rubric", "fn": "javascript", "eval": "javascript", "file": "javascript"}
CSV_TYPES = frozenset((
    "llm-rubric", "javascript", "python", "contains", "icontains", "contains-any", "contains-all",
    "icontains-any", "icontains-all", "equals", "regex", "starts-with", "is-json", "contains-json", "is-sql",
    "contains-sql", "is-xml", "contains-xml", "is-valid-openai-tools-call", "is-valid-openai-function-call",
    "similar", "levenshtein", "rouge-n", "bleu", "meteor", "gleu", "model-graded-closedqa", "factuality",
    "answer-relevance", "context-recall", "context-relevance", "context-faithfulness", "g-eval", "classifier",
    "moderation", "perplexity", "perplexity-score", "cost", "latency", "webhook", "select-best", "word-count",
))


class _Where:
    """The file a value came from and its line, for messages."""

    def __init__(self, path: Path, line: int | None = None) -> None:
        self.path, self.line = path, line

    def fail(self, field: str | None, problem: str, line: int | None = None) -> DatasetError:
        return DatasetError(self.path, line if line is not None else self.line, field, problem)


def _file_ref(base: Path, value: str) -> Path:
    return (base.parent / value.removeprefix("file://")).resolve()


def _prompt_text(config_path: Path, prompts: Any) -> tuple[str, int | None]:
    where = _Where(config_path, line_of(prompts))
    if isinstance(prompts, str):
        prompts = [prompts]
    if isinstance(prompts, dict):  # {file://a.txt: label} or {raw text: label}
        prompts = list(prompts)
    if not isinstance(prompts, list) or not prompts:
        raise where.fail("prompts", "must be a prompt or a non-empty list of prompts")
    first = prompts[0]
    line = line_of(first) or line_of(prompts)
    if isinstance(first, dict):
        raw = first.get("raw", first.get("id"))
        if not isinstance(raw, str) or not raw.strip():
            raise where.fail("prompts[0]", "needs raw (the prompt's text) or id (a file://)", line)
        first = raw
    if not isinstance(first, str) or not first.strip():
        raise where.fail("prompts[0]", "must be the prompt's text or a file:// path", line)
    if first.startswith("file://"):
        target = _file_ref(config_path, first)
        if target.suffix not in (".txt", ".md", ".json", ".j2", ".yaml", ".yml", ""):
            raise where.fail("prompts[0]", f"{target.suffix} prompt files are code; decoevo reads text or JSON "
                             "chat prompts", line)
        return read_import_text(target, "prompt file"), None
    return first, line


def _skill_from_prompt(config_path: Path, text: str, line: int | None, qvar: str) -> str | None:
    """The solver skill a prompt holds: a chat prompt's system message(s), else the text without the
    question's placeholder. Variables other than the question are refused: the solver sees the question."""
    where = _Where(config_path, line)
    chat: Any = None
    if text.lstrip().startswith("["):
        try:
            chat = json.loads(text)
        except json.JSONDecodeError:
            chat = None
    if isinstance(chat, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in chat):
        others = sorted({v for m in chat if m.get("role") != "system" for v in VAR.findall(m["content"])} - {qvar})
        system = [m["content"] for m in chat if m.get("role") == "system"]
        used = {v for m in chat for v in VAR.findall(m["content"])}
        if qvar not in used:
            raise where.fail("prompts[0]", f"the chat prompt never uses {{{{{qvar}}}}}, the question's variable")
        skill_vars = sorted({v for s in system for v in VAR.findall(s)})
        if others or skill_vars:
            raise where.fail("prompts[0]", f"uses variables besides the question ({', '.join(others + skill_vars)}); "
                             "decoevo's solver sees the skill and the question only")
        return "\n\n".join(s.strip() for s in system if s.strip()) or None
    names = set(VAR.findall(text))
    if qvar not in names:
        raise where.fail("prompts[0]", f"the prompt never uses {{{{{qvar}}}}}, the question's variable "
                         f"(it uses: {', '.join(sorted(names)) or 'none'})")
    if names - {qvar}:
        raise where.fail("prompts[0]", f"uses variables besides the question ({', '.join(sorted(names - {qvar}))}); "
                         "decoevo's solver sees the skill and the question only")
    skill = VAR.sub("", text).strip()
    return skill or None


def _tests(config_path: Path, config: dict[str, Any]) -> list[tuple[Path, int | None, str, dict[str, Any]]]:
    """Every test as (file, line, field, test), inline or from file:// references."""
    raw = config.get("tests")
    if raw is None:
        raise _Where(config_path, line_of(config)).fail("tests", "is missing; decoevo reads its questions from "
                                                        "the tests")
    refs = [raw] if isinstance(raw, str) else raw
    if not isinstance(refs, list) or not refs:
        raise _Where(config_path, line_of(config)).fail("tests", "must be a non-empty list of tests or file:// paths")
    out: list[tuple[Path, int | None, str, dict[str, Any]]] = []
    for i, item in enumerate(refs):
        if isinstance(item, dict):
            out.append((config_path, line_of(item), f"tests[{i}]", item))
        elif isinstance(item, str) and item.startswith("file://"):
            out.extend(_tests_file(_file_ref(config_path, item)))
        else:
            raise _Where(config_path, line_of(refs)).fail(f"tests[{i}]", "must be a test (a mapping) or a file:// path")
    return out


def _tests_file(path: Path) -> list[tuple[Path, int | None, str, dict[str, Any]]]:
    if path.suffix == ".csv":
        return _csv_tests(path)
    if path.suffix == ".jsonl":
        rows: list[tuple[Path, int | None, str, dict[str, Any]]] = []
        for n, line in enumerate(read_import_text(path, "tests file").split("\n"), 1):
            if line.strip():
                try:
                    obj = json.loads(line, parse_constant=_no_constant)
                except (json.JSONDecodeError, RecursionError, ValueError) as exc:
                    raise DatasetError(path, n, None, f"not valid JSON ({getattr(exc, 'msg', exc)})") from None
                if not isinstance(obj, dict):
                    raise DatasetError(path, n, None, "each line must be a test (a JSON object)")
                rows.append((path, n, "test", obj))
        return rows
    value = load_yaml_lined(path, "tests file")
    if not isinstance(value, list):
        raise DatasetError(path, None, None, "a tests file must hold a list of tests")
    out = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise DatasetError(path, line_of(value), f"[{i}]", "must be a test (a mapping)")
        out.append((path, line_of(item), f"[{i}]", item))
    return out


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def _csv_assertion(cell: str) -> dict[str, Any]:
    """A promptfoo CSV `__expected` cell as the assertion promptfoo makes of it: `grade:`/`llm-rubric:` a
    rubric, `fn:`/`eval:`/`javascript:` JavaScript, `TYPE:` or `not-TYPE(threshold):` that type, anything
    else an `equals`."""
    match = CSV_ASSERT.match(cell)
    if match is None:
        return {"type": "equals", "value": cell}
    neg, kind, threshold, value = match.groups()
    kind = CSV_ALIASES.get(kind, kind)
    if kind not in CSV_TYPES:
        return {"type": "equals", "value": cell}
    out: dict[str, Any] = {"type": f"{neg or ''}{kind}", "value": value.strip()}
    if threshold is not None:
        out["threshold"] = float(threshold)
    return out


def _csv_tests(path: Path) -> list[tuple[Path, int | None, str, dict[str, Any]]]:
    """promptfoo's CSV tests: a column per variable; `__expected` columns hold assertions (`grade: ...`)."""
    out: list[tuple[Path, int | None, str, dict[str, Any]]] = []
    for line, row in csv_records(path, read_import_text(path, "tests file")):
        asserts = [_csv_assertion(cell) for col, cell in row.items() if col.startswith("__expected") and cell.strip()]
        test: dict[str, Any] = {"vars": {k: v for k, v in row.items() if not k.startswith("__")}, "assert": asserts}
        if row.get("__description"):
            test["description"] = row["__description"]
        out.append((path, line, "row", test))
    return out


def _find_question_var(config_path: Path, tests: list[tuple[Path, int | None, str, dict[str, Any]]],
                       prompt: str) -> str:
    in_prompt = set(VAR.findall(prompt))
    everywhere: set[str] | None = None
    for _, _, _, test in tests:
        variables = test.get("vars")
        names = {k for k in variables if isinstance(k, str)} if isinstance(variables, dict) else set()
        everywhere = names if everywhere is None else everywhere & names
    everywhere = everywhere or set()
    for pool in (everywhere & in_prompt, everywhere):
        if len(pool) == 1:
            return next(iter(pool))
    common = [n for n in COMMON_NAMES if n in everywhere]
    if common:
        return common[0]
    raise DatasetError(config_path, None, "tests", "cannot tell which variable holds the question (every test has: "
                       f"{', '.join(sorted(everywhere)) or 'none'}); name it with --question-var")


def _assertions(path: Path, line: int | None, field: str, asserts: Any) -> list[tuple[str, GoldItem | None]]:
    """Each assertion's type and, for an llm-rubric, the gold criterion it becomes (None: promptfoo's own)."""
    if asserts is None:
        return []
    if not isinstance(asserts, list):
        raise DatasetError(path, line, f"{field}.assert", "must be a list of assertions")
    out: list[tuple[str, GoldItem | None]] = []
    for k, a in enumerate(asserts):
        where = line_of(a) or line_of(asserts) or line
        if not isinstance(a, dict):
            raise DatasetError(path, where, f"{field}.assert[{k}]", "must be a mapping with type")
        kind = a.get("type")
        if not isinstance(kind, str) or not kind.strip() or not kind.isprintable():
            raise DatasetError(path, where, f"{field}.assert[{k}].type", "must name the assertion's type")
        sign = RUBRIC_TYPES.get(kind)
        value = a.get("value")
        if sign is None or (isinstance(value, str) and value.startswith("file://")):
            out.append((kind if sign is None else f"{kind} (file:// value)", None))
            continue
        if not isinstance(value, str) or not value.strip():
            raise DatasetError(path, where, f"{field}.assert[{k}].value", "an llm-rubric needs its rubric as text")
        weight = a.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 1e6:
            raise DatasetError(path, where, f"{field}.assert[{k}].weight", "must be a positive number")
        out.append((kind, GoldItem(text=" ".join(value.split()), points=sign * float(weight))))
    return out


def _requirement(item: GoldItem) -> str:
    return item.text if item.points > 0 else f"Does not do this: {item.text}"


def _question_text(source: Path, line: int | None, field: str, text: Any) -> str:
    if isinstance(text, float) and not math.isfinite(text):
        raise DatasetError(source, line, field, f"is {text}, not a question")
    if isinstance(text, bool) or not isinstance(text, str | int | float) or not str(text).strip():
        kind = ("a list (promptfoo runs each value; decoevo reads one)" if isinstance(text, list)
                else "empty or not text")
        raise DatasetError(source, line, field, f"is {kind}")
    return str(text)


def _name(qid: str, source: Path, line: int | None, test: dict[str, Any]) -> str:
    desc = test.get("description")
    where = f"{source.name}:{line}" if line is not None else source.name
    label = f" {' '.join(desc.split())[:60]!r}" if isinstance(desc, str) and desc.strip() else ""
    return f"{qid} ({where}{label})"


def _uses(counts: Counter[str], became: str, suffix: str = "") -> list[Use]:
    out = []
    for kind, n in counts.most_common():
        base = kind.removesuffix(" (file:// value)")
        if kind in RUBRIC_TYPES:
            out.append(Use(kind + suffix, n, became))
        elif base != kind:
            out.append(Use(kind + suffix, n, None, "a rubric in a file decoevo does not read"))
        else:
            out.append(Use(kind + suffix, n, None, "promptfoo runs these; decoevo cannot"))
    return out


def read_promptfoo(path: Path, *, question_var: str | None = None) -> Imported:
    config = load_yaml_lined(path, "promptfoo config")
    if not isinstance(config, dict):
        raise DatasetError(path, None, None, "a promptfoo config is a mapping (prompts, providers, tests, ...)")
    if "prompts" not in config:
        raise DatasetError(path, line_of(config), "prompts", "is missing")
    prompt, prompt_line = _prompt_text(path, config["prompts"])
    tests = _tests(path, config)
    qvar = question_var or _find_question_var(path, tests, prompt)
    skill = _skill_from_prompt(path, prompt, prompt_line, qvar)
    default = config.get("defaultTest") or {}
    if not isinstance(default, dict):
        raise DatasetError(path, line_of(config), "defaultTest", "must be a mapping")
    shared_asserts = _assertions(path, line_of(default), "defaultTest", default.get("assert"))
    shared = [i for _, i in shared_asserts if i is not None]
    questions: list[Question] = []
    requirements: dict[str, None] = {_requirement(i): None for i in shared}
    counts: Counter[str] = Counter()
    fields: Counter[str] = Counter()
    unchecked: list[str] = []
    no_gold = secrets = 0
    for n, (source, line, field, test) in enumerate(tests, 1):
        variables = test.get("vars")
        if not isinstance(variables, dict) or qvar not in variables:
            raise DatasetError(source, line, f"{field}.vars.{qvar}", "is missing (the question's variable; "
                               "name another with --question-var)")
        text = _question_text(source, line, f"{field}.vars.{qvar}", variables[qvar])
        asserts = _assertions(source, line, field, test.get("assert"))
        counts.update(kind for kind, _ in asserts)
        own = [i for _, i in asserts if i is not None]
        qid = f"t{n:03d}"
        if asserts and not own:
            unchecked.append(_name(qid, source, line, test))
        items = own + shared
        for item in own:
            requirements.setdefault(_requirement(item), None)
        gold = GoldRubric(scheme="weighted", items=tuple(items)) if any(i.points > 0 for i in items) else None
        no_gold += gold is None
        fields.update(str(k) for k in test if k not in READ_FIELDS)
        kept = {str(k): v for k, v in test.items() if k != "vars"}
        kept["vars"] = {k: v for k, v in variables.items() if k != qvar}
        kept, dropped = without_secrets(plain(kept, source, line, field))
        secrets += dropped
        meta = {"promptfoo": {"question_var": qvar, **kept}}
        turns = (Turn(role="user", content=text),)
        questions.append(Question(id=qid, turns=turns, gold=gold, meta=meta))
    reqs = list(requirements)
    if len(reqs) > MAX_SPEC_ITEMS:
        reqs = [*reqs[:MAX_SPEC_ITEMS], f"(and {len(reqs) - MAX_SPEC_ITEMS} more of the same kind)"]
    uses = [*_uses(counts, "gold rubric/task spec"),
            *_uses(Counter(kind for kind, _ in shared_asserts), "every test's gold rubric/task spec", " (defaultTest)"),
            *(Use(f"test field '{k}'", c, None, "kept for the export; a decoevo run does not use it")
              for k, c in fields.most_common())]
    if isinstance(config.get("scenarios"), list) and config["scenarios"]:
        uses.append(Use("scenarios", len(config["scenarios"]), None, "decoevo reads the tests only"))
    model, model_note = imported_model(config.get("providers"))
    notes = [model_note] if model_note else []
    if no_gold:
        notes.append(f"{no_gold} of {len(questions)} tests have no llm-rubric (their own or defaultTest's): "
                     "no gold rubric; the test split takes tests that have one first (`decoevo compare` and "
                     "`decoevo eval` grade against it and refuse a test split holding one without)")
    kept_config, dropped = without_secrets({k: plain(config[k], path, line_of(config[k]) or line_of(config), k)
                                            for k in KEPT_CONFIG if k in config})
    if secrets + dropped:
        notes.append(f"{secrets + dropped} credential(s) written in the file (apiKey, ...) are not kept: decoevo "
                     "never copies a key; it reads keys from environment variables")
    summary = ImportSummary(unit="tests", read=len(questions), uses=tuple(uses), unchecked=tuple(unchecked),
                            unchecked_why="have only assertions decoevo does not use", notes=tuple(notes))
    return Imported(source=str(path), format="promptfoo", questions=tuple(questions), skill=skill,
                    requirements=tuple(reqs), summary=summary, model=model, kept=kept_config)
