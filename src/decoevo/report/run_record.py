"""What the report knows about one run: frozen records read from its directory by `runs.load_run`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..analysis.costs import RunUsage
from ..analysis.discrimination import Discrimination
from ..rundir import TranscriptEntry
from ..rundir.evalfiles import results_of, shipped_comparison
from ..rundir.outcomes import Outcome
from ..rundir.progress import LiveProgress
from ..rundir.records import AlignmentFile, CompareFile, DynamicsFile, EvalFile, Provenance
from .labels import is_tiny_embedded


def as_map(v: Any) -> dict[str, Any]:
    """A mapping from parsed YAML/JSON, or {} for anything else (a damaged file is reported elsewhere)."""
    return v if isinstance(v, dict) else {}


@dataclass(frozen=True)
class SkillVersion:
    kind: str
    version: int
    parent: int | None
    reason: str
    text: str
    diff: str | None  # unified diff against the parent; None for v000 or when there is no parent


@dataclass(frozen=True)
class Candidate:
    """A candidate skill the gate rejected, with the diff it would have applied to its parent."""

    kind: str
    label: str
    version: int | None
    parent: int | None
    reason: str
    text: str
    diff: str | None


@dataclass(frozen=True)
class InnerGate:
    step: int
    accepted: bool
    j_incumbent: float | None
    j_candidate: float | None
    n: int | None
    solver_version: int | None
    note: str | None
    outcome: Outcome  # accepted, rejected, invalid or no candidate (rundir/outcomes.py)

    @property
    def delta(self) -> float | None:
        if self.j_incumbent is None or self.j_candidate is None:
            return None
        return self.j_candidate - self.j_incumbent


@dataclass(frozen=True)
class OuterGate:
    round: int
    structural_records: int
    contrastive_records: int
    accepted: bool | None  # None: no candidate was proposed (no records, or audits routed to the solver)
    policy: str | None
    reason: str | None
    deltas: Mapping[str, float]
    generator_version: int | None
    outcome: Outcome  # accepted, rejected, invalid or no candidate (rundir/outcomes.py)
    after_step: int | None = None  # the inner step the round followed (None: the log has no step before it)


@dataclass(frozen=True)
class Incident:
    """A step or round that failed, a budget stop, a crash or a resume, from events.jsonl."""

    event: str
    where: str
    category: str | None
    role: str | None
    message: str


@dataclass(frozen=True)
class AuditRound:
    index: int
    structural: tuple[Mapping[str, Any], ...]
    contrastive: tuple[Mapping[str, Any], ...]
    frozen_pairs: tuple[Mapping[str, Any], ...]
    verification: Mapping[str, Any] | None


@dataclass(frozen=True)
class ModelUse:
    name: str  # the key in lm.models
    label: str  # what the model is called (ModelSpec.model)
    backend: str
    roles: tuple[str, ...]  # roles routed to it; "default" means every other role

    @property
    def embedded_tiny(self) -> bool:
        return is_tiny_embedded(self.label)


@dataclass(frozen=True)
class RunRecord:
    path: Path
    name: str
    anchor: str
    method: str
    seed: int | None
    benchmark: str
    backbone: str
    sweep: Path | None
    config: Mapping[str, Any]
    summary: Mapping[str, Any] | None
    status: str  # finished | budget stop | parity budget reached | stopped (error) | incomplete
    status_detail: str | None
    models: tuple[ModelUse, ...]
    judge_model: str
    budget: Mapping[str, Any]
    usage: RunUsage | None
    ledger_total: Mapping[str, Any] | None
    solver: tuple[SkillVersion, ...]
    generator: tuple[SkillVersion, ...]
    candidates: tuple[Candidate, ...]
    inner_gates: tuple[InnerGate, ...]
    outer_gates: tuple[OuterGate, ...]
    incidents: tuple[Incident, ...]
    audits: tuple[AuditRound, ...]
    evals: Mapping[str, EvalFile]  # every grading under eval/, by file stem (any skill version and grader)
    dynamics: DynamicsFile | None
    alignment: AlignmentFile | None
    # the run's own transcripts, by the phase that made them ("step 3", "outer 1"): what each gate saw;
    # the first few of each phase (`transcripts_shown`), and how many the phase made
    transcripts: Mapping[str, tuple[TranscriptEntry, ...]] = field(default_factory=dict)
    transcript_counts: Mapping[str, int] = field(default_factory=dict)
    problems: tuple[str, ...] = field(default=())
    provenance: Provenance | None = None  # None for runs made before provenance.json existed
    split_ids: Mapping[str, tuple[str, ...]] | None = None  # splits.json; None when absent or unreadable
    test_gold: bool | None = None  # whether a test question has a gold rubric; None: data not readable here
    shipped_version: int | None = None  # the solver version the run ships (None: no skill found)
    comparisons: Mapping[str, CompareFile] = field(default_factory=dict)  # eval/compare-*.json, by file stem
    progress: LiveProgress | None = None  # how far a run a live process is still writing has got
    # an unfinished run's last checkpoint, where a resume continues: (steps completed, its solver version);
    # None when no step completed (a resume starts over, the calls it paid for from the cache)
    checkpoint: tuple[int, int | None] | None = None
    discrimination: Discrimination | None = None  # whether its judge's scores can tell answers apart

    @property
    def finished(self) -> bool:
        return self.summary is not None

    @property
    def data(self) -> Mapping[str, Any]:
        """The config's data section (path, format, task), or {} when damaged."""
        return as_map(self.config.get("data"))

    @property
    def results(self) -> Mapping[str, EvalFile]:
        """The run's results: per evaluation (test, transfer-…), the grading of the skill it ships. A grading
        of another version (`eval --skill-version 0`) is shown labelled by its version, never as the result."""
        return {name: self.evals[stem] for name, stem in results_of(self.evals, self.shipped_version).items()}

    @property
    def test_eval(self) -> EvalFile | None:
        return self.results.get("test")

    @property
    def transfer_evals(self) -> tuple[EvalFile, ...]:
        return tuple(e for e in self.results.values() if e.kind == "transfer")

    @property
    def comparison(self) -> CompareFile | None:
        """The initial against the shipped skill on the test split (`decoevo compare`), if compared."""
        stem = shipped_comparison(self.comparisons, self.shipped_version)
        return self.comparisons[stem] if stem is not None else None
