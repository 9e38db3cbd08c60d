"""The benchmark registry is lazy (a folder is imported when its benchmark is used, issue 47.2) and cannot drift
from the folders: what it lists as data (format name, gold scheme, task names, order) is what each folder's record
says, and every folder with a record is listed."""

from __future__ import annotations

import importlib
import json
import pkgutil
import subprocess
import sys
from dataclasses import replace

import pytest

import decoevo.benchmarks as benchmarks_pkg
from decoevo.benchmarks import registry
from decoevo.benchmarks.custom import loader as custom_loader
from decoevo.benchmarks.record import Benchmark

# each folder's modules, by folder; the run loads its own benchmark's folder only
FOLDERS = sorted(m.name for m in pkgutil.iter_modules(benchmarks_pkg.__path__) if m.ispkg)


def loaded_after(code: str) -> set[str]:
    """The `decoevo.benchmarks.<folder>` packages a fresh interpreter has loaded after running `code`."""
    script = f"import json, sys\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {m.split(".")[2] for m in json.loads(done.stdout.splitlines()[-1])
            if m.startswith("decoevo.benchmarks.") and m.split(".")[2] in FOLDERS}


def test_the_registry_lists_what_every_folder_declares():
    """Each entry's name, scheme and task names are its folder's record's, in the paper's column order; every
    folder that builds a record is listed (a new folder without its line would be invisible)."""
    declared = {}
    for folder in FOLDERS:
        record = getattr(importlib.import_module(f"decoevo.benchmarks.{folder}"), "BENCHMARK", None)
        if isinstance(record, Benchmark):
            declared[record.name] = (f".{folder}", record.scheme, record.tasks)
    assert declared == {name: tuple(entry) for name, entry in registry.ENTRIES.items()}
    assert list(registry.ENTRIES) == ["healthbench", "writingbench", "scholarqa_cs", "researchqa", "llmeval_med",
                                      "eqbench_cw", "jsonl"]
    assert {b.scheme: name for name, b in registry.BENCHMARKS.items()} == {
        scheme: registry.BY_SCHEME[scheme].name for scheme in registry.BY_SCHEME}
    assert custom_loader.known_schemes() == tuple(registry.BY_SCHEME)  # users' gold rubrics are checked against them


@pytest.mark.parametrize("task", ["healthbench", "researchqa", "generic", "somebody's own task"])
def test_structural_spec_is_the_benchmark_records_own(task):
    owner = next((b for b in (registry.BENCHMARKS[n] for n in registry.ENTRIES) if task == b.name or task in b.tasks),
                 registry.BENCHMARKS["jsonl"])
    assert registry.structural_spec(task) == owner.task_spec


def test_a_folder_whose_record_disagrees_is_refused(monkeypatch):
    """The registry's data and a folder edited alone: the record's first lookup says which, never a silent mix."""
    monkeypatch.setitem(registry.ENTRIES, "writingbench", registry.Entry(".writingbench", "writing"))
    with pytest.raises(RuntimeError, match=r"declares 'writingbench'.*scheme 'writing'"):
        registry._load("writingbench")


def test_graders_are_known_by_scheme_without_loading_them():
    from decoevo.benchmarks.graders import GRADER_ROLES, GRADERS

    assert "weighted" in GRADERS and "jsonl" not in GRADERS and "nothing" not in GRADERS
    assert list(GRADERS) == list(registry.BY_SCHEME) and len(GRADERS) == len(registry.ENTRIES) == len(GRADER_ROLES)
    assert GRADERS.get("nothing") is None and GRADERS["healthbench"] is registry.BENCHMARKS["healthbench"].grade


def test_importing_the_registry_imports_no_benchmark_folder_but_users_own():
    """Users' own data (`jsonl`) is the default format, so its loader is imported with the package; the six
    published benchmarks' folders are not, and listing the names imports none of them."""
    listed = loaded_after("import decoevo.benchmarks as b, decoevo.benchmarks.graders as g\n"
                          "names = list(b.BENCHMARKS), list(b.BY_SCHEME), list(g.GRADERS), g.GRADER_ROLES\n"
                          "assert 'writingbench' in b.BENCHMARKS and len(b.BENCHMARKS) == 7, names")
    assert listed == {"custom"}


@pytest.mark.parametrize(("use", "folders"), [
    ("b.BENCHMARKS['writingbench']", {"custom", "writingbench"}),
    ("b.find('eqbench_cw')", {"custom", "eqbench_cw", "writingbench"}),  # it shares WritingBench's task spec
    ("b.structural_spec('researchqa')", {"custom", "researchqa"}),
    ("b.load_llmeval_med", {"custom", "llmeval_med", "healthbench"}),  # shares HealthBench's task spec
    ("b.GRADERS['scholarqa_cs']", {"custom", "scholarqa_cs", "researchqa"}),
])
def test_a_benchmark_is_imported_when_it_is_used(use, folders):
    assert loaded_after(f"import decoevo.benchmarks as b, decoevo.benchmarks.graders\n{use}") == folders


def test_listing_every_benchmark_still_sees_each_record():
    """What `decoevo data list` and the report iterate: every record, in order."""
    assert [b.name for b in registry.BENCHMARKS.values()] == list(registry.ENTRIES)
    assert all(b.source is not None for b in registry.BENCHMARKS.values() if b.name != "jsonl")


def test_a_replaced_or_added_record_is_what_lookups_return(monkeypatch):
    """Setting a key replaces the record (tests swap a benchmark's data source that way) or adds one, which is then
    listed like the others; both are undone."""
    original = registry.BENCHMARKS["healthbench"]
    swapped = replace(original, label="HealthBench (test)")
    monkeypatch.setitem(registry.BENCHMARKS, "healthbench", swapped)
    monkeypatch.setitem(registry.BENCHMARKS, "extra", replace(original, name="extra"))
    assert registry.get_benchmark("healthbench") is swapped and registry.find("healthbench") is swapped
    assert list(registry.BENCHMARKS)[-1] == "extra" and len(registry.BENCHMARKS) == len(registry.ENTRIES) + 1
    assert registry.get_benchmark("extra").name == "extra"
    monkeypatch.undo()
    assert registry.get_benchmark("healthbench") is original
    assert "extra" not in registry.BENCHMARKS and list(registry.BENCHMARKS) == list(registry.ENTRIES)


def test_an_unknown_name_is_refused_with_the_known_ones():
    from decoevo.lm.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown benchmark 'healthbnch'; known: healthbench, writingbench"):
        registry.get_benchmark("healthbnch")
    assert registry.find("nothing") is None and "nothing" not in registry.BENCHMARKS
