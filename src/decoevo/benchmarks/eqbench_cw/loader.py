"""EQ-Bench Creative Writing v3: writing prompts with a <SEED> slot and seed modifiers; 22 criteria 0-20.

Folder: `creative_writing_prompts*.json` ({id: {category, title, writing_prompt, seed_modifiers}}),
`creative_writing_criteria.txt` (one criterion a line) and `negative_criteria.txt` (the criteria where
higher is worse; the grader inverts them as 20 - x).

Which modifiers: the benchmark writes each prompt `ITERATIONS` (3) times, each time with another seed
modifier, so by default (and in the registry) a prompt gives 3 questions, ids `<prompt id>-m0..m2`, with
its first 3 modifiers in file order. `modifiers=N` takes the first N, `"first"` the first only and
`"all"` every one. All are deterministic: file order, no sampling.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ...domain import GoldItem, GoldRubric, Question, Turn
from ...errors import DatasetError
from ...lm.errors import ConfigError
from ..common import build, field_name, need_list, need_object, need_text, read_json, ref, unique

SEED = "<SEED>"
ITERATIONS = 3  # the benchmark's own: each prompt is written 3 times, with 3 different seed modifiers
CRITERIA_FILE = "creative_writing_criteria.txt"
NEGATIVE_FILE = "negative_criteria.txt"


def _prompts_file(folder: Path) -> Path:
    found = sorted(folder.glob("creative_writing_prompts*.json"))
    if not found:
        raise DatasetError(folder / "creative_writing_prompts*.json", None, None, "file not found")
    return found[0]


def _names(path: Path) -> list[str]:
    if not path.is_file():
        raise DatasetError(path, None, None, "file not found (it must sit next to the prompts file)")
    names = [ln.strip() for ln in path.read_text(encoding="utf-8").split("\n") if ln.strip()]
    if not names:
        raise DatasetError(path, None, None, "lists no criteria")
    seen: set[str] = set()
    for n, name in enumerate(names, 1):
        if name in seen:
            raise DatasetError(path, n, None, f"criterion '{name}' is listed twice")
        seen.add(name)
    return names


def criteria_items(folder: Path) -> tuple[GoldItem, ...]:
    names = _names(folder / CRITERIA_FILE)
    negative = _names(folder / NEGATIVE_FILE)
    unknown = [n for n in negative if n not in names]
    if unknown:
        raise DatasetError(folder / NEGATIVE_FILE, None, None, f"names criteria not in {CRITERIA_FILE}: {unknown}")
    # negative_rank: the criterion's place in negative_criteria.txt (the official judge prompt lists them so)
    return tuple(GoldItem(text=n, tags=("negative",) if n in negative else (),
                          extra={"negative": n in negative, **({"negative_rank": negative.index(n)} if n in negative
                                                                else {})})
                 for n in names)


def _how_many(modifiers: Literal["first", "all"] | int) -> int | None:
    if modifiers == "first":
        return 1
    if modifiers == "all":
        return None
    if isinstance(modifiers, bool) or not isinstance(modifiers, int) or modifiers < 1:
        raise ConfigError(f"modifiers must be 'first', 'all' or a positive count, not {modifiers!r}")
    return modifiers


def load_eqbench_cw(path: Path | str, modifiers: Literal["first", "all"] | int = ITERATIONS) -> list[Question]:
    """`path` is the benchmark folder or its prompts JSON file (criteria files are read next to it)."""
    count = _how_many(modifiers)
    path = Path(path)
    prompts = _prompts_file(path) if path.is_dir() else path
    data = read_json(prompts)
    items = criteria_items(prompts.parent)
    if not isinstance(data, dict):
        raise DatasetError(prompts, None, None, "must be a JSON object keyed by prompt id")
    out = []
    for key, raw in data.items():
        where = ref(key)
        rec = need_object(prompts, None, where, raw)
        template = need_text(prompts, None, where, rec, "writing_prompt")
        if SEED not in template:
            raise DatasetError(prompts, None, field_name(where, "writing_prompt"), f"has no {SEED} placeholder")
        mods = need_list(prompts, None, where, rec, "seed_modifiers")
        for i, mod in enumerate(mods):
            if not isinstance(mod, str) or not mod.strip():
                raise DatasetError(prompts, None, field_name(where, f"seed_modifiers[{i}]"),
                                   "must be a non-empty string")
        for i, mod in enumerate(mods[:count]):
            # writing_prompt: the prompt with its <SEED> slot, which the official judge is shown
            meta = {"prompt_id": key, "category": rec.get("category"), "title": rec.get("title"),
                    "seed_index": i, "seed_modifier": mod, "writing_prompt": template}
            out.append((None, where, build(prompts, None, where, id=f"{key}-m{i}", task="eqbench_cw",
                                           turns=(Turn(role="user", content=template.replace(SEED, mod)),),
                                           gold=GoldRubric(scheme="eqbench_cw", items=items), meta=meta)))
    return unique(prompts, out)
