"""Official grader prompts, fetched from their pinned upstream sources and used verbatim.

decoevo ships no text of any benchmark's grader prompt. `decoevo data fetch NAME` downloads the upstream
file that holds it (a commit-pinned URL, checked against its sha256 where it is known) into
`<data root>/<benchmark>/official/`, and the grader reads the prompt out of that file when it grades:
- a text file is the prompt as it is;
- a Python file is parsed (never run) and the prompt is the string assigned to a named variable, or the
  string a named function builds (its literal pieces in order, each interpolated value written as a
  `<<name>>` placeholder that the grader fills).
Every prompt is checked for the placeholders its grader fills, so an upstream change of shape is refused
with a message rather than graded with a broken prompt.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Literal

from ..fileio import atomic_write_text, sha256_file
from ..lm.errors import ConfigError
from .datastore import folder, source_url
from .download import FetchError, download
from .record import Benchmark, OfficialPrompts, TemplateSource

OFFICIAL_DIR = "official"
CHECKSUMS = "checksums.json"
GraderPrompt = Literal["auto", "official", "ours"]
# The upstream files are source files of tens of KiB; an endless or wrong answer stops here, like a data file's.
TEMPLATE_CEILING = 4 << 20


def template_dir(bench: Benchmark) -> Path:
    return folder(bench) / OFFICIAL_DIR


def _recorded(bench: Benchmark) -> dict[str, str]:
    try:
        data = json.loads((template_dir(bench) / CHECKSUMS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def _expected(bench: Benchmark, src: TemplateSource) -> str | None:
    return src.sha256 or _recorded(bench).get(src.file_name)


def fetch_templates(bench: Benchmark, *, force: bool = False) -> list[str]:
    """Download the upstream files of `bench`'s official prompts that are not here and verified; returns
    the names downloaded. Each is checked by reading its prompts, so a file of the wrong shape is removed
    and refused."""
    fetched: list[str] = []
    for src in _unique_files(bench):
        dest = template_dir(bench) / src.file_name
        want = _expected(bench, src)
        if dest.is_file() and not force and (want is None or sha256_file(dest) == want):
            continue
        dest.unlink(missing_ok=True)
        try:
            got = download(source_url(src.url), dest, want, limit=TEMPLATE_CEILING)
        except FetchError as exc:
            raise ConfigError(f"{bench.label} official grader prompt: {exc}") from None
        try:
            for s in bench.official_prompts:
                if s.file_name == src.file_name:
                    extract(s, dest.read_text(encoding="utf-8"))
        except (ConfigError, UnicodeDecodeError) as exc:
            dest.unlink(missing_ok=True)
            raise ConfigError(f"{src.url}: {exc}") from None
        if src.sha256 is None:
            atomic_write_text(
                template_dir(bench) / CHECKSUMS,
                json.dumps({**_recorded(bench), src.file_name: got}, indent=2, sort_keys=True) + "\n",
            )
        fetched.append(src.file_name)
    return fetched


def _unique_files(bench: Benchmark) -> list[TemplateSource]:
    seen: dict[str, TemplateSource] = {}
    for s in bench.official_prompts:
        seen.setdefault(s.file_name, s)
    return list(seen.values())


def fetched(bench: Benchmark) -> bool:
    return bool(bench.official_prompts) and all(
        (template_dir(bench) / s.file_name).is_file() for s in bench.official_prompts
    )


def load_official(bench: Benchmark) -> OfficialPrompts:
    """The official prompts of `bench` from its fetched files, each file checked against its checksum."""
    if not bench.official_prompts:
        raise ConfigError(f"{bench.label}: no official grader prompt is known; use grader_prompt 'ours'")
    texts: dict[str, str] = {}
    for src in bench.official_prompts:
        path = template_dir(bench) / src.file_name
        if not path.is_file():
            raise ConfigError(
                f"{bench.label}: the official grader prompt is not fetched ({path} missing); run "
                f"`decoevo data fetch {bench.name}`, or grade with grader_prompt 'ours'"
            )
        want = _expected(bench, src)
        if want is not None and sha256_file(path) != want:
            raise ConfigError(f"{path}: sha256 does not match {want}; run `decoevo data fetch {bench.name} --force`")
        texts[src.key] = extract(src, path.read_text(encoding="utf-8"))
    return OfficialPrompts(bench.name, texts, bench.official_prompts)


def resolve(bench: Benchmark | None, mode: GraderPrompt) -> OfficialPrompts | None:
    """The prompts to grade `bench` with: the official ones (mode "official", or "auto" when they are
    fetched), else None (our own prompt)."""
    if mode == "ours" or bench is None:
        return None
    if mode == "auto" and not fetched(bench):
        return None
    if bench.official is None:
        if mode == "official":
            raise ConfigError(f"{bench.label}: grading with the official prompt is not implemented; use 'ours'")
        return None
    return load_official(bench)


# ---- reading a prompt out of its file -------------------------------------------------------------------
def extract(src: TemplateSource, text: str) -> str:
    if src.kind == "text":
        prompt = text
    else:
        try:
            tree = ast.parse(text)
        except SyntaxError as exc:
            raise ConfigError(f"not Python source ({exc.msg}, line {exc.lineno})") from None
        read = {"python_string": _python_string, "python_function": _python_function, "python_system": _python_system}
        prompt = read[src.kind](tree, src.symbol)
    missing = [p for p in src.placeholders if p not in prompt]
    if missing:
        raise ConfigError(
            f"the upstream prompt {src.symbol or src.file_name} lacks {', '.join(missing)}; its shape "
            "changed, so decoevo will not grade with it"
        )
    return prompt


def _python_string(tree: ast.Module, name: str) -> str:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return _literal(node.value, name)
    raise ConfigError(f"no assignment to {name}")


def _function(tree: ast.Module, name: str) -> ast.FunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            return node
    raise ConfigError(f"no function {name}")


def _python_function(tree: ast.Module, symbol: str) -> str:
    """`func`: the string its first top-level assignment or return builds; `func.var`: the string assigned
    to `var` anywhere in it."""
    name, _, var = symbol.partition(".")
    fn = _function(tree, name)
    if var:
        for node in ast.walk(fn):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == var for t in node.targets):
                return _literal(node.value, symbol)
    else:
        for stmt in fn.body:
            if isinstance(stmt, ast.Assign | ast.Return) and stmt.value is not None:
                return _literal(stmt.value, symbol)
    raise ConfigError(f"no string {symbol}")


def _python_system(tree: ast.Module, name: str) -> str:
    """The content of the `{"role": "system", "content": ...}` message the function sends."""
    for node in ast.walk(_function(tree, name)):
        if isinstance(node, ast.Dict):
            pairs = {
                k.value: v
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
            role = pairs.get("role")
            if isinstance(role, ast.Constant) and role.value == "system" and "content" in pairs:
                return _literal(pairs["content"], name)
    raise ConfigError(f"no system message in {name}")


def _literal(node: ast.expr, where: str) -> str:
    """The text of a string expression built from literals: constants, f-strings (an interpolated name
    becomes `<<name>>`), `+`, `SEP.join(name)` (becomes `<<name>>`) and `.strip()` of a literal."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_literal(v, where) for v in node.values)
    if isinstance(node, ast.FormattedValue) and isinstance(node.value, ast.Name):
        return f"<<{node.value.id}>>"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _literal(node.left, where) + _literal(node.right, where)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.keywords:
        if node.func.attr == "join" and len(node.args) == 1 and isinstance(node.args[0], ast.Name):
            return f"<<{node.args[0].id}>>"
        if node.func.attr == "strip" and not node.args:
            return _literal(node.func.value, where).strip()
    raise ConfigError(f"{where}: line {getattr(node, 'lineno', '?')} is not a plain string expression")
