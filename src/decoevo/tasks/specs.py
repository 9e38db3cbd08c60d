"""The initial skills. (Each benchmark's structural-audit specification π_str lives in its folder under
`decoevo.benchmarks`; `decoevo.benchmarks.structural_spec(task)` looks one up.)"""

from __future__ import annotations

INITIAL_SOLVER_SKILL = (
    "Answer the user's request directly and accurately. Cover what matters most first, be specific, "
    "and state important caveats."
)

INITIAL_GENERATOR_SKILL = (
    "Write criteria that are specific to the question rather than generic. Each criterion checks one "
    "thing. Give the highest weights to what the user needs most."
)
