"""The named methods: each is a configuration of the one engine, not a copy of the loop."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal

from .errors import ConfigError
from .policies import AcceptEveryCandidate, GeneratorVerification, VerifyByAudits, VerifyBySolverScore

Group = Literal["baseline", "method", "ablation", "control"]


@dataclass(frozen=True)
class MethodSpec:
    """A method: its flags, the policy that verifies its candidate generators, its group in the report."""

    name: str
    description: str
    group: Group = "method"
    optimize_solver: bool = True
    evolve_generator: bool = True
    acceptance: GeneratorVerification = field(default_factory=VerifyByAudits)
    structural_audit: bool = True
    contrastive_audit: bool = True
    rubric_blind: bool = True
    pair_selection: Literal["near_tie", "random"] = "near_tie"
    distill: bool = True
    task_prior: bool = False  # add π_str to the fixed generator skill
    audit_to_solver: bool = False  # route audit records to the solver rewriter instead
    budget_matched: bool = False  # keep taking solver steps until the run's budget is spent

    @property
    def runs_audits(self) -> bool:
        return (self.evolve_generator or self.audit_to_solver) and (self.structural_audit or self.contrastive_audit)


_DECOEVO = MethodSpec("decoevo", "DecoEvo: solver gate + audit-driven, score-decoupled generator evolution")
_SKILLOPT = MethodSpec("skillopt", "solver-only optimization; the initial generator skill never changes",
                       group="baseline", evolve_generator=False, structural_audit=False, contrastive_audit=False)

METHODS: dict[str, MethodSpec] = {m.name: m for m in [
    MethodSpec("zero_shot", "no optimization: the initial solver skill", group="baseline", optimize_solver=False,
               evolve_generator=False, structural_audit=False, contrastive_audit=False),
    _SKILLOPT,
    replace(_DECOEVO, name="sc_coevo", group="baseline", acceptance=VerifyBySolverScore(),
            description="score-coupled co-evolution: DecoEvo's proposals, accepted by the solver's aggregate score"),
    _DECOEVO,
    # ablations
    replace(_DECOEVO, name="no_structural", group="ablation", structural_audit=False,
            description="DecoEvo without structural audit"),
    replace(_DECOEVO, name="no_contrastive", group="ablation", contrastive_audit=False,
            description="DecoEvo without contrastive audit"),
    replace(_DECOEVO, name="no_rubric_blind", group="ablation", rubric_blind=False,
            description="DecoEvo whose pairwise auditor sees the rubric from the start"),
    replace(_DECOEVO, name="random_pairs", group="ablation", pair_selection="random",
            description="DecoEvo with random rollout pairs instead of near-ties"),
    replace(_DECOEVO, name="no_verification", group="ablation", acceptance=AcceptEveryCandidate(),
            description="DecoEvo accepting every candidate generator"),
    replace(_DECOEVO, name="no_distillation", group="ablation", distill=False,
            description="DecoEvo appending raw per-example suggestions instead of distilling"),
    # controls
    replace(_SKILLOPT, name="task_prior", group="control", task_prior=True,
            description="SkillOpt with the structural-audit spec added to the fixed generator skill"),
    replace(_SKILLOPT, name="budget_matched", group="control", budget_matched=True,
            description="SkillOpt taking extra solver steps up to a call/token budget (set one)"),
    replace(_DECOEVO, name="direct_audit", group="control", evolve_generator=False, audit_to_solver=True,
            description="audit records routed to the solver rewriter; generator fixed"),
]}


def get_method(name: str) -> MethodSpec:
    key = name.replace("-", "_").lower()
    if key not in METHODS:
        raise ConfigError(f"unknown method '{name}'; choose one of: {', '.join(METHODS)}")
    return METHODS[key]
