"""No import circle among the project's modules (src/decoevo and bench), read from their source.

bench/mechanism/advice.py and doc.py once imported each other (issue 48 item 4): it worked only because of
the order the modules happened to load in. An import made at module level (not inside a function, not under
`TYPE_CHECKING`) is an edge; a submodule's import of its own package is not (Python loads the package first
whatever the submodule says).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = (ROOT / "src" / "decoevo", ROOT / "bench")


def modules() -> dict[str, Path]:
    out = {}
    for package in PACKAGES:
        for path in package.rglob("*.py"):
            parts = list(path.relative_to(package.parent).with_suffix("").parts)
            out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The known modules `name` imports when it loads."""
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.Import):
                found.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                above = package[: len(package) - node.level + 1] if node.level else []
                base = ".".join([*above, node.module or ""]).strip(".")
                found.add(base)
                found.update(f"{base}.{a.name}" for a in node.names)  # `from pkg import module`
            elif isinstance(node, ast.Try) or (isinstance(node, ast.If) and "TYPE_CHECKING" not in ast.unparse(
                    node.test)):
                visit(node.body)
                visit(node.orelse)

    visit(ast.parse(path.read_text(encoding="utf-8")).body)
    return {m for m in found if m in known and m != name and not name.startswith(m + ".")}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def test_no_module_imports_itself_through_others():
    found = modules()
    graph = {name: imports(name, path, set(found)) for name, path in found.items()}
    assert graph["bench.mechanism.doc"] >= {"bench.mechanism.advice"}  # the reader sees `from pkg import mod`
    assert circles(graph) == []


def test_the_reader_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
