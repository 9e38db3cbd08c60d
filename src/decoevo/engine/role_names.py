"""Every role a configuration's `lm.roles` may send to a model of its own: the optimization roles, the
benchmarks' graders and the rubric matcher of `decoevo align`. A name outside this set routes nothing,
so the configuration refuses it (a misspelt role would silently fall back to the default model)."""

from __future__ import annotations

from ..benchmarks import GRADER_ROLES
from ..roles import (
    contrastive_audit,
    generate_rubric,
    judge,
    rewrite_generator,
    rewrite_solver,
    solve,
    structural_audit,
)

OPTIMIZATION_ROLES = (solve.ROLE, generate_rubric.ROLE, judge.ROLE, rewrite_solver.ROLE, structural_audit.ROLE,
                      contrastive_audit.STAGE1_ROLE, contrastive_audit.STAGE2_ROLE, rewrite_generator.ROLE)
MATCHER_ROLE = "matcher"  # evaluation's rubric matcher (`decoevo align`; evaluation/models.py routes it)
ROUTABLE_ROLES: tuple[str, ...] = (*OPTIMIZATION_ROLES, *GRADER_ROLES, MATCHER_ROLE)
