"""Deterministic, disjoint splits drawn by seed: pilot, train, probe, V_s, V_g, diagnostic, test."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from ..domain import Question
from ..lm.errors import ConfigError

SPLIT_NAMES = ("pilot", "train", "probe", "solver_gate", "generator_gate", "diagnostic", "test")
REQUIRED = ("train", "solver_gate")  # what every optimizing method needs
GOLD_SPLITS = ("diagnostic", "test")  # graded against gold rubrics (`decoevo dynamics`, `eval`, `compare`)


class SplitSizes(BaseModel):
    """Questions in each split. The splits are disjoint and drawn by the seed (the same seed and sizes always
    give the same splits); together they may not ask for more questions than the data holds. A method needs
    train and solver_gate non-empty when it optimizes the solver, probe when it runs audits, and
    generator_gate when it verifies generator candidates."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

    pilot: int = Field(0, ge=0, description="for `decoevo pilot` (choosing ε, τ_tie, K); cut first, never "
                                            "used by a run")
    train: int = Field(8, ge=0, description="the inner loop's batches are drawn from it")
    probe: int = Field(3, ge=0, description="the outer loop's structural and contrastive audits run on it")
    solver_gate: int = Field(4, ge=0, description="V_s: the solver gate compares J on it")
    generator_gate: int = Field(3, ge=0, description="V_g: a generator candidate is verified on it")
    diagnostic: int = Field(0, ge=0, description="for `decoevo dynamics` (every checkpoint graded on it)")
    test: int = Field(0, ge=0, description="held out for `decoevo eval` and `decoevo align`")

    def total(self) -> int:
        return sum(getattr(self, n) for n in SPLIT_NAMES)


@dataclass(frozen=True)
class Splits:
    pilot: tuple[Question, ...]
    train: tuple[Question, ...]
    probe: tuple[Question, ...]
    solver_gate: tuple[Question, ...]
    generator_gate: tuple[Question, ...]
    diagnostic: tuple[Question, ...]
    test: tuple[Question, ...]

    def ids(self) -> dict[str, list[str]]:
        return {n: [q.id for q in getattr(self, n)] for n in SPLIT_NAMES}


def check_disjoint(splits: Mapping[str, Sequence[Question]]) -> None:
    owner: dict[str, str] = {}
    for name, qs in splits.items():
        for q in qs:
            if q.id in owner:
                raise ConfigError(f"question '{q.id}' is in both the {owner[q.id]} and the {name} split; "
                                  "splits must be disjoint")
            owner[q.id] = name


class SplitsTooLarge(ConfigError):
    """The split sizes need more questions than the data has (a caller that chose the sizes may say how
    else to get smaller ones, e.g. a smaller preset)."""


def make_splits(questions: Sequence[Question], sizes: SplitSizes, seed: int,
                required: Sequence[str] = REQUIRED) -> Splits:
    """Shuffle by seed and cut in SPLIT_NAMES order; the same seed always gives the same splits.

    Questions sharing `meta["question_key"]` (one question annotated twice, as in ScholarQA-CS) move
    together, so the same question never sits in two splits; a split may then get one extra question."""
    for name in required:
        if getattr(sizes, name) == 0:
            raise ConfigError(f"split '{name}' is empty; set splits.{name} to at least 1")
    if sizes.total() > len(questions):
        asked = ", ".join(f"{n} {getattr(sizes, n)}" for n in SPLIT_NAMES if getattr(sizes, n))
        raise SplitsTooLarge(f"the splits ask for {sizes.total()} questions but the data has {len(questions)} "
                             f"({asked}); reduce the split sizes (e.g. --set splits.test=N) or add questions")
    groups: dict[str, list[Question]] = {}
    for q in sorted(questions, key=lambda q: q.id):
        groups.setdefault(str(q.meta.get("question_key", q.id)), []).append(q)
    order = [groups[k] for k in sorted(groups)]
    random.Random(seed).shuffle(order)
    # Data that mixes questions with and without a gold rubric (a promptfoo config whose tests do not all hold an
    # llm-rubric): the splits graded against gold take gold questions first, the others the rest first, so
    # `decoevo eval` and `compare` grade the test split. Data all one way is cut exactly as before.
    graded = [g for g in order if all(q.gold is not None for q in g)]
    mixed = 0 < len(graded) < len(order)
    rest = [g for g in order if not all(q.gold is not None for q in g)] if mixed else order
    cut: dict[str, tuple[Question, ...]] = {}
    for name in SPLIT_NAMES:
        taken: list[Question] = []
        first, then = (graded, rest) if mixed and name in GOLD_SPLITS else (rest, graded) if mixed else (order, [])
        while len(taken) < getattr(sizes, name) and (first or then):
            taken += (first or then).pop(0)
        if len(taken) < getattr(sizes, name):
            raise ConfigError(f"not enough distinct questions left for the {name} split; reduce the split sizes")
        cut[name] = tuple(taken)
    check_disjoint(cut)
    return Splits(**cut)
