"""Where an evaluation result lives under RUN/eval/, and which one is the run's result.

One file per evaluation (test, a transfer), solver skill version and grader, so grading the initial skill
after the shipped one (or with another grader) adds a file and never replaces one:
`eval/<name>-v<NNN>-<grader>.json`, e.g. `eval/test-v003-gpt-4.1-official.json`. Runs evaluated before
this layout have `eval/<name>.json`; those files still read, with the skill version they record.
A grader named by a file path (a GGUF, or a llama.cpp server's model without an alias) is named by the
file's stem plus a short hash of the whole path, `test-v003-smollm2-1.7b-instruct-q4_k_m-3f2a9c-ours`, so two
files of one name in different folders never share a result; runs evaluated before that have the path's
file name instead (`…-q4_k_m.gguf-ours`), and still read: results are found by listing eval/, not by name.
A comparison of two skills (`decoevo compare`) is `eval/compare-...json`, never read as a grading.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Protocol

COMPARE_PREFIX = "compare-"
_UNSAFE = re.compile(r"[^a-z0-9._]+")
MODEL_FILE_SUFFIXES = (".gguf", ".ggml", ".bin", ".safetensors")
_DRIVE = re.compile(r"^[A-Za-z]:[\\/]")
# Control characters (line breaks and tabs too) and bidirectional overrides, which a model name never holds.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029]")


def is_path_name(model: str) -> bool:
    """Whether a model's name is a file path (a GGUF, or what a llama.cpp server serves without an alias),
    not a name like `gpt-4.1` or `Qwen/Qwen3-8B` (an organisation's prefix is part of a hub name)."""
    name = model.strip()
    return (name.lower().endswith(MODEL_FILE_SUFFIXES) or name.startswith(("/", "~", "./", "../", "\\"))
            or bool(_DRIVE.match(name)))


def short_model_name(model: str) -> str:
    """What terminal lines and reports call a model: a path's file name without its extension
    (`/root/.cache/…/SmolLM2-1.7B-Instruct-Q4_K_M.gguf` -> `SmolLM2-1.7B-Instruct-Q4_K_M`), any other name as
    it is. Several names (`a, b`) are shortened each. The record keeps the whole name."""
    if ", " in model:
        return ", ".join(short_model_name(m) for m in model.split(", "))
    # a name is one line of a message: a newline in it would forge another line (escaped after shortening,
    # so an escape's backslash is never read as a Windows path's separator)
    return _CONTROL.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), _short_name(model))


def _short_name(model: str) -> str:
    if not is_path_name(model):
        return model
    base = model.strip().replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    for suffix in MODEL_FILE_SUFFIXES:
        if base.lower().endswith(suffix):
            base = base[: -len(suffix)]
            break
    return base or model


def slug(text: str, limit: int = 48) -> str:
    """A file-name part: lower case, runs of anything but letters, digits, '.' and '_' as one '-'."""
    out = _UNSAFE.sub("-", text.lower()).strip("-.")
    return out[:limit].rstrip("-.") or "unnamed"


def grader_slug(grader_model: str | None, grader_prompt: str | None) -> str:
    """The grader's part of a file name: its model's name and its prompt. A path is named by its file's
    stem and a hash of the whole path (two folders' `model.gguf` are two graders)."""
    model = grader_model or "grader"
    if is_path_name(model):
        digest = hashlib.sha256(model.strip().encode()).hexdigest()[:6]
        return f"{slug(short_model_name(model), 40)}-{digest}-{grader_prompt or 'ours'}"
    tail = model.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]  # a provider's prefix dropped
    return f"{slug(tail)}-{grader_prompt or 'ours'}"


def result_stem(name: str, skill_version: int, grader_model: str | None, grader_prompt: str | None) -> str:
    """`test-v003-gpt-4.1-official`: the stem of one evaluation's result file under eval/."""
    return f"{name}-v{skill_version:03d}-{grader_slug(grader_model, grader_prompt)}"


def compare_stem(name: str, before: int, after: int | str, grader_model: str | None,
                 grader_prompt: str | None) -> str:
    """`compare-test-v000-v003-gpt-4.1-official`: a comparison of two solver versions on `name`'s questions;
    `after` a string (a skill file's slug): `compare-test-v003-prompt-1a2b3c4d-gpt-4.1-official`."""
    second = f"v{after:03d}" if isinstance(after, int) else after
    return f"{COMPARE_PREFIX}{name}-v{before:03d}-{second}-{grader_slug(grader_model, grader_prompt)}"


class _Graded(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def skill_version(self) -> int | None: ...
    @property
    def self_graded(self) -> bool | None: ...
    @property
    def n_graded(self) -> int: ...
    @property
    def grader_prompt(self) -> str | None: ...


def _preference(stem: str, ev: _Graded) -> tuple[int, int, int, str]:
    """Higher is preferred: an independent grader, then more questions graded, then the official prompt;
    the file name breaks a tie, so the choice never depends on the order files were listed in."""
    independent = {False: 2, None: 1, True: 0}[ev.self_graded]
    return independent, ev.n_graded, int(ev.grader_prompt == "official"), stem


def results_of(evals: Mapping[str, _Graded], version: int | None) -> dict[str, str]:
    """For each evaluation name (test, transfer-…): the file stem of its result for solver `version`
    (a record that does not say its version counts as any), the best graded when there are several."""
    best: dict[str, str] = {}
    for stem, ev in evals.items():
        if version is not None and ev.skill_version is not None and ev.skill_version != version:
            continue
        held = best.get(ev.name)
        if held is None or _preference(stem, ev) > _preference(held, evals[held]):
            best[ev.name] = stem
    return best


class _Compared(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def before_version(self) -> int: ...
    @property
    def after_version(self) -> int | None: ...
    @property
    def self_graded(self) -> bool | None: ...
    @property
    def n_paired(self) -> int: ...


def shipped_comparison(comparisons: Mapping[str, _Compared], shipped: int | None) -> str | None:
    """The stem of the comparison of the initial (v000) and the `shipped` solver on the test split; the
    independent and best-covered one when several graders compared them."""
    if shipped is None:
        return None
    own = [(c.self_graded is False, c.n_paired, stem) for stem, c in comparisons.items()
           if c.name == "test" and c.before_version == 0 and c.after_version == shipped]
    return max(own)[2] if own else None


def graded_ids(record: object) -> list[str] | None:
    """The question ids a grading (its items) or a comparison (its rows) holds; None when it lists none."""
    items = getattr(record, "items", None)
    if isinstance(items, list) and items:
        return [str(i.get("question_id")) for i in items if isinstance(i, Mapping)]
    rows = getattr(record, "rows", None)
    if isinstance(rows, list) and rows:
        return [str(r.question_id) for r in rows]
    return None


def foreign(record: object, run_id: str | None, split_ids: Mapping[str, Sequence[str]] | None) -> str | None:
    """Why a result under a run's eval/ is not that run's own (copied from another run), or None: it names
    another run id, or (records from before ids were kept) grades questions the run's split does not hold."""
    theirs = getattr(record, "run_id", None)
    if theirs is not None and run_id is not None and theirs != run_id:
        return f"was written for run {theirs}, but this run is {run_id}"
    name, kind = getattr(record, "name", None), getattr(record, "kind", None)
    ids = graded_ids(record)
    if kind == "test" and split_ids is not None and isinstance(name, str) and split_ids.get(name) and ids:
        extra = sorted(set(ids) - set(split_ids[name]))
        if extra:
            return (f"grades {len(extra)} question(s) this run's {name} split does not hold (first: {extra[0]}): "
                    "copied from another run?")
    return None


def cut_short(record: object, split_ids: Mapping[str, Sequence[str]] | None) -> str | None:
    """How a grading of one of the run's splits covers less than the split (a file cut short or edited: an
    evaluation grades a split whole), or None."""
    name, kind = getattr(record, "name", None), getattr(record, "kind", None)
    ids = graded_ids(record)
    if kind != "test" or split_ids is None or not isinstance(name, str) or name not in split_ids or ids is None:
        return None
    missing = sorted(set(split_ids[name]) - set(ids))
    if missing:
        return (f"holds {len(set(ids))} of the {len(split_ids[name])} questions of the {name} split (first "
                f"missing: {missing[0]}): cut short or edited, so its score is not over the whole split")
    return None
