"""What is known of a model's rewrites before a run, for the one model decoevo ships: the embedded default.

How often a rewriter writes a non-skill (a loop, a cut-off text, an answer instead of instructions) decides
how many gate scorings and verifications a run pays, and nothing in a configuration says it. For a model
behind a server decoevo knows nothing, so the estimate assumes every rewrite usable (engine/estimate.py).
For the embedded default it has counted: `embedded_prior.yaml`, next to this module, holds the outcomes of
its runs on other seeds than the README's first run (which the estimate is checked on, so never fitted
to), with the command that made them. A share is the counted one as a Jeffreys mean, (k + ½) / (n + 1):
a handful of runs never makes it 0 or 1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

import yaml

from ..lm import LMConfig, ModelSpec
from ..roles import rewrite_generator, rewrite_solver
from .estimate import Rates

PRIOR_FILE = Path(__file__).with_name("embedded_prior.yaml")


@dataclass(frozen=True)
class Counted:
    """Outcomes counted over the embedded default's measured runs."""

    runs: int
    steps: int  # inner steps
    ungated: int  # of which the rewrite never reached the gate (invalid, or no candidate)
    kept: int  # of which the incumbent stayed (ungated ones included)
    rounds: int  # outer rounds
    generator_invalid: int  # of which the generator rewrite was invalid
    source: str  # where the counts came from, in a few words

    @staticmethod
    def share(k: int, n: int) -> float:
        return (k + 0.5) / (n + 1)

    def describe(self) -> str:
        runs = f"{self.runs} measured run{'s' if self.runs != 1 else ''}"
        return (f"the embedded model's rewrites unusable as often as in its {runs} "
                f"({self.ungated} of {self.steps} steps)")


def counted(runs: list[dict[str, object]], source: str) -> Counted:
    """The outcomes of `runs` (entries of embedded_prior.yaml) added up."""
    def total(key: str) -> int:
        return sum(int(str(r[key])) for r in runs)

    return Counted(len(runs), total("steps"), total("ungated"), total("kept"), total("rounds"),
                   total("generator_invalid"), source)


@cache
def embedded_counts(path: Path = PRIOR_FILE) -> Counted:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    return counted(list(data["runs"]), str(data["source"]))


def is_embedded_default(spec: ModelSpec) -> bool:
    """The bundled weights (a local model given no GGUF of its own)."""
    return spec.backend == "local" and not spec.gguf_path


def with_counts(base: Rates, c: Counted, *, solver: bool = True, generator: bool = True) -> Rates:
    """`base` with the counted shares: the solver rewriter's (steps not gated, steps kept) and the generator
    rewriter's (rounds not verified)."""
    rates = base
    if solver:
        ungated = Counted.share(c.ungated, c.steps)
        rates = replace(rates, ungated=ungated, reject=max(base.reject, Counted.share(c.kept, c.steps), ungated))
    if generator:
        rates = replace(rates, generator_invalid=Counted.share(c.generator_invalid, c.rounds))
    return rates


def model_prior(base: Rates, lm: LMConfig | None) -> tuple[Rates, Counted | None]:
    """`base` with the embedded default's measured shares where the embedded default writes the rewrites,
    and the counts used (None: no measured prior applies, `base` unchanged)."""
    if lm is None:
        return base, None
    solver = is_embedded_default(lm.models[lm.model_for(rewrite_solver.ROLE)])
    generator = is_embedded_default(lm.models[lm.model_for(rewrite_generator.ROLE)])
    if not solver and not generator:
        return base, None
    c = embedded_counts()
    return with_counts(base, c, solver=solver, generator=generator), c
