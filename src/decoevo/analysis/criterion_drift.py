"""Criterion drift: which rubric criteria the accepted solver versions stopped meeting (no gold needed).

Every solver gate judges the incumbent's and the candidate's answers on V_s under one rubric per
question (`RUN/gates/stepNNN.json`). For each criterion (by its text) and each accepted rewrite, the
change in its mean score between the two arms is measured under that fixed rubric; chaining the changes
over the accepted versions gives the criterion's level relative to where it started. A criterion is
flagged when it ends at least `min_drop` below the best level it reached: an accepted rewrite made the
answers meet it less, and no later one restored it. That is what forgetting looks like (a principle the
rubric still rewards fell out of the strategy) and what crowding out looks like (the strategy grew and
its older principles are followed less). A gate judges both arms on the same questions, so the changes
are paired; `min_questions` keeps criteria seen on too few of them out.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MIN_DROP = 0.3
MIN_QUESTIONS = 3
# What a flag is worth as a predictor that co-evolving lost (DecoEvo's gold below SkillOpt's on the same seed),
# measured over the simulated prior's worlds by bench/mechanism/prior.py (bench/results/mechanism_prior.json;
# tests/test_mechanism_doc.py checks these are its numbers). The report shows them next to every flag.
AS_LOSS_PREDICTOR: dict[str, float | int | None] = {"precision": 0.288, "recall": 0.519, "runs": 480}


@dataclass(frozen=True)
class CriterionTrack:
    criterion: str
    levels: tuple[float, ...]  # level after each accepted rewrite it was measured at, starting at 0.0
    steps: tuple[int, ...]  # the step of each change
    worst_step: int | None  # the accepted rewrite that lowered it most
    drop: float  # best level reached minus the final level
    flagged: bool


@dataclass(frozen=True)
class DriftReport:
    accepted_steps: tuple[int, ...]
    criteria: tuple[CriterionTrack, ...] = field(default_factory=tuple)
    min_drop: float = MIN_DROP

    @property
    def flagged(self) -> tuple[CriterionTrack, ...]:
        return tuple(c for c in self.criteria if c.flagged)

    def to_json(self) -> dict[str, Any]:
        return {
            "accepted_steps": list(self.accepted_steps),
            "min_drop": self.min_drop,
            "flagged": [{"criterion": c.criterion, "drop": round(c.drop, 3), "step": c.worst_step}
                        for c in self.flagged],
            "criteria": len(self.criteria),
        }


def criterion_drift(records: Iterable[Mapping[str, Any]], *, min_drop: float = MIN_DROP,
                    min_questions: int = MIN_QUESTIONS) -> DriftReport:
    """The drift of every criterion over the accepted gate records (pure: records in, report out)."""
    accepted = sorted((r for r in records if r.get("accepted")), key=lambda r: int(r["step"]))
    changes: dict[str, list[tuple[int, float]]] = {}
    for r in accepted:
        per: dict[str, list[float]] = {}
        for q in r.get("questions", []):
            for text, old, new in zip(q["criteria"], q["incumbent"], q["candidate"], strict=False):
                per.setdefault(str(text), []).append(float(new) - float(old))
        for text, diffs in per.items():
            if len(diffs) >= min_questions:
                changes.setdefault(text, []).append((int(r["step"]), statistics.fmean(diffs)))
    tracks = []
    for text, seq in changes.items():
        levels, level = [0.0], 0.0
        for _, d in seq:
            level += d
            levels.append(level)
        drop = max(levels) - levels[-1]
        worst = min(seq, key=lambda sd: sd[1])
        tracks.append(CriterionTrack(text, tuple(levels), tuple(s for s, _ in seq),
                                     worst[0] if worst[1] < 0 else None, drop, drop >= min_drop - 1e-9))
    tracks.sort(key=lambda t: (-t.drop, t.criterion))
    return DriftReport(tuple(int(r["step"]) for r in accepted), tuple(tracks), min_drop)


def read_gate_records(run_dir: Path) -> list[dict[str, Any]]:
    """The gate records of a run (none for runs made before they were written)."""
    folder = run_dir / "gates"
    if not folder.is_dir():
        return []
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(folder.glob("step*.json"))]


def run_drift(run_dir: Path) -> DriftReport:
    return criterion_drift(read_gate_records(run_dir))
