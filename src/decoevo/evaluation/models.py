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
from ..rundir.evalfiles import short_model_name

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


def model_name(spec: ModelSpec) -> str:
    """A model's whole name, as records keep it: an embedded model's GGUF path when one is given (its
    `model` is only a label, and two folders' files of one name are two models), else the served name."""
    return spec.gguf_path if spec.backend == "local" and spec.gguf_path else spec.model


def model_label(config: LMConfig, roles: Iterable[str]) -> str:
    """A readable name of the model(s) behind `roles`, for reports: a path by its file's stem
    (`short_model_name`)."""
    names = sorted({short_model_name(model_name(config.models[config.model_for(r)])) for r in roles})
    return ", ".join(names)
