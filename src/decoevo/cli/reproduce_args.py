"""`decoevo reproduce`'s flags, state file and directory, checked before anything is written: each bad
value is one line naming the flag (or file and key) and what to give; a directory that is not an
experiment of ours, a report.html of the user's, and a rerun whose runs would not match the runs already
in the directory are refused with nothing changed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import ConfigError, validation_summary
from ..lm import ModelSpec
from ..redact import register_url_secrets
from ..userfiles import load_yaml_mapping
from .settings import apply_set, parse_seeds

SHARED_KEYS = ("hyper", "splits", "budget")
# the keys of a plan's reproduce.yaml (ReproducePlan.to_yaml): a file with others is somebody else's
STATE_KEYS = frozenset({"solver", "grader", "data", "seeds", "benchmarks", "tables", "preset", "shared",
                        "allow_self_grading", "transfer_limit", "sample_seed"})
REPORT = "report.html"
_OUR_REPORT = '<meta name="generator" content="decoevo'  # in the head of every report we render


def csv(flag: str, text: str | None) -> list[str] | None:
    """A comma-separated flag; left out: None. Given but empty (`--tables ""`, an unset variable in a
    script) is refused, not read as "all"."""
    if text is None:
        return None
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        raise ConfigError(f"--{flag} is empty; give a comma-separated list or leave the flag out")
    return items


def seeds(text: str | None) -> list[int] | None:
    return None if text is None else parse_seeds(text)


def data(items: Sequence[str], known: Sequence[str]) -> dict[str, dict[str, Any]]:
    """--data NAME=PATH[:FORMAT][@LIMIT] (format: the benchmark's own, or jsonl); NAME one of `known`."""
    out: dict[str, dict[str, Any]] = {}
    for item in items:
        name, sep, rest = item.partition("=")
        if not sep or not name or not rest:
            raise ConfigError(f"--data expects NAME=PATH[:FORMAT][@LIMIT], e.g. healthbench=hb.jsonl; got '{item}'")
        if "://" in rest:  # read as a path, a URL's token was printed back in "file not found"
            register_url_secrets(rest)
            raise ConfigError(f"--data {name}: reproduce reads local files, not URLs ({rest}); fetch it first "
                              f"(`decoevo data fetch {name}`, or download it) and give its path")
        if name not in known:
            raise ConfigError(f"--data {name}: not a benchmark of the experiment; name one of {', '.join(known)}")
        rest, _, limit = rest.partition("@")
        path, _, fmt = rest.rpartition(":") if ":" in Path(rest).name else (rest, "", "")
        count: int | None = None
        if limit:
            if not limit.isdigit() or int(limit) < 1:
                raise ConfigError(f"--data {name}: the limit after @ must be a whole number of questions, at "
                                  f"least 1; got '{limit}'")
            count = int(limit)
        out[name] = {"path": str(Path(path).resolve()), "format": fmt or name, "limit": count}
    return out


def sets(items: Sequence[str]) -> dict[str, Any] | None:
    """--set hyper.KEY=VALUE, splits.KEY=VALUE or budget.KEY=VALUE (a YAML value), or a whole section."""
    out: dict[str, Any] = {}
    for item in items:
        key = item.partition("=")[0].strip()
        if key.split(".")[0] not in SHARED_KEYS or "=" not in item:
            raise ConfigError(f"--set expects hyper.KEY=VALUE, splits.KEY=VALUE or budget.KEY=VALUE; got '{item}'")
        apply_set(out, item)
    for section, value in out.items():
        if not isinstance(value, dict):
            raise ConfigError(f"--set {section}: give its keys (--set {section}.KEY=VALUE) or a mapping")
    return out or None


def models_file(path: Path, grader: ModelSpec | None) -> tuple[ModelSpec, ModelSpec | None]:
    """--models FILE: `solver:` and (optionally) `grader:` model specs."""
    specs = load_yaml_mapping(path, "--models file")
    if "solver" not in specs:
        raise ConfigError(f"{path}: expected a mapping with `solver:` (and `grader:`) model specs")
    found: dict[str, ModelSpec] = {}
    for role in ("solver", "grader"):
        if specs.get(role) is None:
            continue
        try:
            found[role] = ModelSpec.model_validate(specs[role])
        except ValueError as exc:
            raise ConfigError(f"{path}: {role}: {validation_summary(exc)}") from None
    return found["solver"], found.get("grader", grader)


def read_state(out: Path, state_file: str) -> dict[str, Any] | None:
    """The plan an earlier `decoevo reproduce OUT` stored, or None for a new or empty directory. A
    directory holding files but no plan of ours, or a state file that is not one, is refused."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is not a directory; name a new or empty directory for the experiment")
    path = out / state_file
    if not path.exists():
        held = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
        if held:
            shown = ", ".join(held[:3]) + (", ..." if len(held) > 3 else "")
            raise ConfigError(f"{out} exists and is not a reproduce directory (it holds {shown} and no "
                              f"{state_file}); name a new or empty directory")
        return None
    state = load_yaml_mapping(path, "reproduce state")
    unknown = sorted(set(state) - STATE_KEYS)
    if "solver" not in state or unknown:
        why = f"unknown key {unknown[0]!r}" if unknown else "no `solver:`"
        raise ConfigError(f"{path}: not a plan written by `decoevo reproduce` ({why}); move it away or name "
                          "another directory")
    return state


def check_report(out: Path) -> None:
    """OUT/report.html is replaced at the end only if it is one of our reports: refuse before spending."""
    path = out / REPORT
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise ConfigError(f"{path}: is not a regular file; move it away, the experiment writes its report there")
    if path.is_file():
        with open(path, encoding="utf-8", errors="replace") as f:
            head = f.read(4096)
        if _OUR_REPORT not in head:
            raise ConfigError(f"{path}: not a report decoevo wrote; move it away, the experiment writes its "
                              "report there")


def check_runs_match(cells: Mapping[str, Sequence[Any]], rp: Any) -> None:
    """Every cell's run directory is new or holds the run this plan would make: a rerun that changed a
    result-changing flag (another --model) is refused here, before the plan or any status is rewritten."""
    from ..sweep.plan import CellConflict, action_for

    for bench, group in cells.items():
        for cell in group:
            try:
                action_for(cell, rp.sweep_dir(bench), rp.sweep_spec(bench).evaluate)
            except CellConflict as exc:
                raise ConfigError(f"{exc}: this experiment's runs were made with other settings; rerun it "
                                  "without the changed flags (they are in reproduce.yaml), or name a new "
                                  "directory") from None
