"""Which model answers which evaluation role.

The solver, generator and judge keep the run's own models, so an evaluation reproduces the run's
requests (and hits its cache). The gold grader and the rubric matcher are separate models by design:
they never propose or select updates, and the paper uses a different, stronger model for both.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..benchmarks import GRADER_ROLES
from ..engine.role_names import MATCHER_ROLE
from ..lm import LMConfig, ModelSpec

GRADER_MODEL = "grader"
MATCHER_MODEL = "matcher"


def evaluation_lm_config(run_lm: LMConfig, *, grader: ModelSpec | None = None, matcher: ModelSpec | None = None,
                         use_cache: bool | None = None) -> LMConfig:
    """The run's model map plus the grader and matcher models. Without a `grader`, the run's default
    model grades (fine for checking the pipeline, meaningless as a result for a tiny model); without a
    `matcher`, the grader model matches."""
    models = dict(run_lm.models)
    roles = dict(run_lm.roles)
    if grader is not None:
        models[GRADER_MODEL] = grader
        roles.update(dict.fromkeys(GRADER_ROLES, GRADER_MODEL))
        roles.setdefault(MATCHER_ROLE, GRADER_MODEL)
    if matcher is not None:
        models[MATCHER_MODEL] = matcher
        roles[MATCHER_ROLE] = MATCHER_MODEL
    update = {"models": models, "roles": roles}
    if use_cache is not None:
        update["use_cache"] = use_cache
    return run_lm.model_copy(update=update)


def model_label(config: LMConfig, roles: Iterable[str]) -> str:
    """A readable name of the model(s) behind `roles`, for reports."""
    names = sorted({config.models[config.model_for(r)].model for r in roles})
    return ", ".join(names)
