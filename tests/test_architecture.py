"""The package's import graph, walked from the source: imports point down (docs/architecture.md).

Every import counts, also those inside functions (they are still dependencies; deferring one only
changes when it is paid for)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "decoevo"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    modules = {module_name(p): p for p in SRC.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
                if base.startswith("decoevo"):
                    targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("decoevo")}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def package_of(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "decoevo"


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for source, targets in graph.items():
        for target in targets:
            a, b = package_of(source), package_of(target)
            if a != b and b != "decoevo":  # `from .. import __version__` is no dependency on the whole
                out.setdefault(a, set()).add(b)
    return out


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in list(graph):
        if v not in index:
            visit(v)
    return found


GRAPH = import_graph()
PACKAGES = package_graph(GRAPH)


def test_the_walk_sees_the_package() -> None:
    assert len(GRAPH) > 80 and "decoevo.engine.run" in GRAPH["decoevo.api"]  # not vacuous


def test_no_import_cycle_between_modules_or_packages() -> None:
    assert cycles(GRAPH) == []
    assert cycles(PACKAGES) == []


# The layers of docs/architecture.md, bottom (0) to top: a package imports only packages of lower layers.
LAYERS: dict[str, int] = {
    "errors": 0, "redact": 0, "fileio": 0, "thresholds": 0, "aio": 0, "presets": 0, "domain": 0, "reply_lengths": 0,
    "lm": 1, "scoring": 1,
    "userfiles": 2, "rundir": 2, "policies": 2, "roles": 2,
    "methods": 3, "grading": 3, "api_args": 3,
    "benchmarks": 4,
    "tasks": 5, "analysis": 5,
    "engine": 6, "report": 6,
    "evaluation": 7, "pilot": 7, "testing": 7, "reliability": 7,
    "tracking": 8,
    "api": 9, "interop": 9,
    "sweep": 10,
    "reproduce": 11,
    "cli": 12,
    "__main__": 13,
}


def test_every_package_has_a_layer() -> None:
    assert {package_of(m) for m in GRAPH} - {"decoevo"} == set(LAYERS)


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_a_package_imports_only_lower_layers(package: str) -> None:
    upward = {t for t in PACKAGES.get(package, set()) if LAYERS[t] >= LAYERS[package]}
    assert upward == set(), f"{package} (layer {LAYERS[package]}) imports {sorted(upward)}"


def test_the_package_top_holds_few_modules() -> None:
    top = sorted(p.stem for p in SRC.glob("*.py"))
    assert len(top) <= 18, top


COMMAND_MODULES = ("main", "run", "pilot", "sweep", "export", "report", "methods", "doctor", "eval", "data",
                   "reproduce", "config", "rubric")


@pytest.mark.parametrize("name", COMMAND_MODULES)
def test_a_command_module_stays_short(name: str) -> None:
    lines = len((SRC / "cli" / f"{name}.py").read_text(encoding="utf-8").splitlines())
    assert lines <= 400, f"cli/{name}.py has {lines} lines"


def test_the_reproduce_package_keeps_one_job_per_short_module() -> None:
    """`reproduce/` is split by job (plan, posts, projection, outline, state), each module under 400 lines."""
    sizes = {p.stem: len(p.read_text(encoding="utf-8").splitlines()) for p in (SRC / "reproduce").glob("*.py")}
    assert {"plan", "posts", "projection", "outline", "state"} <= set(sizes), sorted(sizes)
    assert max(sizes.values()) <= 400, sizes


@pytest.mark.parametrize(("package", "forbidden"), [
    ("rundir", {"lm", "engine", "roles", "evaluation", "report", "sweep", "api", "cli"}),
    ("report", {"engine", "evaluation", "roles", "lm", "sweep", "api", "cli"}),
    ("sweep", {"cli"}),
    ("engine", {"evaluation", "report", "sweep", "api", "cli"}),
    ("roles", {"engine", "evaluation", "report", "sweep", "api", "cli", "rundir"}),
    ("lm", {"engine", "roles", "evaluation", "report", "sweep", "api", "cli", "rundir", "domain"}),
    ("api", {"cli"}),
])
def test_imports_point_down(package: str, forbidden: set[str]) -> None:
    assert PACKAGES.get(package, set()) & forbidden == set()


def test_only_the_cli_imports_typer() -> None:
    """The command line (the `cli` package) only."""
    users = []
    for path in SRC.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        if "typer" in names:
            users.append(module_name(path))
    assert users and all(u == "decoevo.cli" or u.startswith("decoevo.cli.") for u in users), users


def test_the_library_never_imports_the_command_line() -> None:
    """`python -m decoevo` (decoevo.__main__) is the command line's second door, not library."""
    importers = {m for m, targets in GRAPH.items() if package_of(m) not in ("cli", "__main__") and any(
        package_of(t) == "cli" for t in targets)}
    assert importers == set()


BENCH = SRC.parents[1] / "bench"


def bench_graph() -> dict[str, set[str]]:
    """bench/'s modules and what each imports of bench/ (absolute `bench.x.y` imports, as bench/ writes them)."""
    modules = {".".join(p.relative_to(BENCH.parent).with_suffix("").parts).removesuffix(".__init__"): p
               for p in BENCH.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("bench"):
                base = node.module or ""
                targets |= {f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names}
            elif isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith("bench")}
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def test_no_import_cycle_among_the_benches() -> None:
    graph = bench_graph()
    assert "bench.mechanism.prior" in graph["bench.mechanism.doc"]  # the walk sees bench/, not vacuous
    assert cycles(graph) == []
