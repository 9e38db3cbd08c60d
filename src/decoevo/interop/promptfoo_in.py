"""A promptfoo config read as decoevo's inputs.

- `tests` (inline, or `file://` YAML/JSON/JSONL/CSV files beside the config): one question per test, the
  value of the variable that holds the question (`--question-var`, else found: the one variable the prompt
  uses, or the one every test has);
- the first prompt: the initial solver skill (a chat prompt's system message, or a text prompt with the
  question's placeholder taken out);
- `llm-rubric` assertions (the tests' and `defaultTest`'s): the task specification's requirements, and each
  test's own as its weighted gold rubric (`not-llm-rubric`: negative points), which `decoevo eval` grades.
"""

from __future__ import annotations

import csv
import io
import json
import re
from pathlib import Path
from typing import Any

from ..domain import GoldItem, GoldRubric, Question, Turn
from ..errors import DatasetError
from ..userfiles import read_user_text
from .imported import Imported
from .yamllines import line_of, load_yaml_lined

VAR = re.compile(r"\{\{\s*([A-Za-z_][\w]*)\s*(?:\|[^}]*)?\}\}")
COMMON_NAMES = ("question", "query", "input", "prompt", "message", "user_input", "request")
RUBRIC_TYPES = {"llm-rubric": 1.0, "not-llm-rubric": -1.0}
MAX_SPEC_ITEMS = 40


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
        return read_user_text(target, "prompt file"), None
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
        for n, line in enumerate(read_user_text(path, "tests file").split("\n"), 1):
            if line.strip():
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise DatasetError(path, n, None, f"not valid JSON ({exc.msg})") from None
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


def _csv_tests(path: Path) -> list[tuple[Path, int | None, str, dict[str, Any]]]:
    """promptfoo's CSV tests: a column per variable; `__expected` columns hold assertions (`llm-rubric: ...`)."""
    reader = csv.DictReader(io.StringIO(read_user_text(path, "tests file")))
    out: list[tuple[Path, int | None, str, dict[str, Any]]] = []
    for row in reader:
        line = reader.line_num
        if None in row:
            raise DatasetError(path, line, None, "has more cells than the header has columns")
        asserts = []
        for col, cell in row.items():
            if col.startswith("__expected") and cell and ":" in cell:
                kind, value = cell.split(":", 1)
                asserts.append({"type": kind.strip(), "value": value.strip()})
        out.append((path, line, "row", {"vars": {k: v for k, v in row.items() if not k.startswith("__")},
                                        "assert": asserts, "description": row.get("__description")}))
    return out


def _find_question_var(config_path: Path, tests: list[tuple[Path, int | None, str, dict[str, Any]]],
                       prompt: str) -> str:
    in_prompt = set(VAR.findall(prompt))
    everywhere: set[str] | None = None
    for _, _, _, test in tests:
        names = set(test.get("vars") or {}) if isinstance(test.get("vars"), dict) else set()
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


def _rubric_items(path: Path, line: int | None, field: str, asserts: Any) -> list[GoldItem]:
    if asserts is None:
        return []
    if not isinstance(asserts, list):
        raise DatasetError(path, line, f"{field}.assert", "must be a list of assertions")
    items = []
    for k, a in enumerate(asserts):
        if not isinstance(a, dict):
            raise DatasetError(path, line_of(asserts) or line, f"{field}.assert[{k}]", "must be a mapping with type")
        sign = RUBRIC_TYPES.get(str(a.get("type")))
        if sign is None:
            continue  # other assertions (contains, javascript, ...) are promptfoo's to run, not a rubric
        where = line_of(a) or line
        value = a.get("value")
        if not isinstance(value, str) or not value.strip():
            raise DatasetError(path, where, f"{field}.assert[{k}].value", "an llm-rubric needs its rubric as text")
        weight = a.get("weight", 1)
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not 0 < weight <= 1e6:
            raise DatasetError(path, where, f"{field}.assert[{k}].weight", "must be a positive number")
        items.append(GoldItem(text=" ".join(value.split()), points=sign * float(weight)))
    return items


def _requirement(item: GoldItem) -> str:
    return item.text if item.points > 0 else f"Does not do this: {item.text}"


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
    shared = _rubric_items(path, line_of(default), "defaultTest", default.get("assert"))
    questions: list[Question] = []
    requirements: dict[str, None] = {_requirement(i): None for i in shared}
    for n, (source, line, field, test) in enumerate(tests, 1):
        variables = test.get("vars")
        if not isinstance(variables, dict) or qvar not in variables:
            raise DatasetError(source, line, f"{field}.vars.{qvar}", "is missing (the question's variable; "
                               "name another with --question-var)")
        text = variables[qvar]
        if isinstance(text, bool) or not isinstance(text, str | int | float) or not str(text).strip():
            kind = ("a list (promptfoo runs each value; decoevo reads one)" if isinstance(text, list)
                    else "empty or not text")
            raise DatasetError(source, line, f"{field}.vars.{qvar}", f"is {kind}")
        own = _rubric_items(source, line, field, test.get("assert"))
        items = own + shared
        for item in own:
            requirements.setdefault(_requirement(item), None)
        gold = GoldRubric(scheme="weighted", items=tuple(items)) if any(i.points > 0 for i in items) else None
        desc = test.get("description")
        meta = {"promptfoo": {"description": desc}} if isinstance(desc, str) and desc else {}
        turns = (Turn(role="user", content=str(text)),)
        questions.append(Question(id=f"t{n:03d}", turns=turns, gold=gold, meta=meta))
    reqs = list(requirements)
    if len(reqs) > MAX_SPEC_ITEMS:
        reqs = [*reqs[:MAX_SPEC_ITEMS], f"(and {len(reqs) - MAX_SPEC_ITEMS} more of the same kind)"]
    return Imported(source=str(path), format="promptfoo", questions=tuple(questions), skill=skill,
                    requirements=tuple(reqs))
