"""Reply lengths of a capable model, as quantile tables: what the projection's tokens per call
(engine/tokens.py) and the simulated model (`decoevo.testing.sim_model`) both take an answer, a rubric and
a criterion to be.

Measured once (not read at run time) on the 500-conversation HealthBench subset (OpenAI, MIT licence;
the same conversations as `decoevo/data/healthbench_sample.jsonl` is drawn from):

- ANSWER_CHARS: characters of the 1,585 reference completions (`ideal_completion` plus the
  `ideal_completions_ref_completions` of each conversation): what a capable model writes as an answer.
- RUBRIC_CRITERIA: rubric items per conversation (500 rubrics, physician-written).
- CRITERION_CHARS: characters of each of the 5,965 rubric items.

Each table holds the 0th, 5th, ..., 100th percentiles (21 values, nearest rank). Roles with no public
reference text (judge rationales, audits, rewrites) use ASSUMED_CHARS: guesses from the lengths our
prompts ask for (a rationale of one or two sentences; a skill of up to 300 words), marked as such.
Token counts are characters / 4, the usual rule of thumb for English text.
"""

from __future__ import annotations

ANSWER_CHARS = (3, 238, 382, 533, 671, 848, 985, 1115, 1301, 1421, 1540, 1688, 1852, 2055, 2301, 2556, 2881,
                3265, 3783, 4414, 13070)
RUBRIC_CRITERIA = (2, 3, 4, 6, 7, 8, 9, 10, 10, 11, 12, 12, 13, 14, 15, 15, 16, 17, 19, 21, 33)
CRITERION_CHARS = (22, 56, 72, 83, 93, 103, 113, 123, 134, 144, 156, 170, 186, 205, 225, 249, 282, 354, 477, 827,
                   3185)

#: assumed, not measured: (5th percentile, median, 95th percentile) characters per text field
ASSUMED_CHARS: dict[str, tuple[int, int, int]] = {
    "rationale": (40, 110, 200),  # a judge's or auditor's reason: one or two sentences
    "skill": (600, 1500, 2200),  # a rewritten skill: "stay under 300 words"
    "analysis": (60, 140, 200),  # a rewriter's short diagnosis
    "default": (20, 80, 160),  # any other string field
}

CHARS_PER_TOKEN = 4
