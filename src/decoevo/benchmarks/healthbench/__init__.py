"""HealthBench (OpenAI, 2025): health conversations graded against physician-written rubrics with
signed points. The official files are dated JSONL files on OpenAI's public blob store."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ...grading.result import GradeResult
from ...grading.rules import mean
from ..record import Benchmark, DataFile, DataSource, Split, per_item_calls
from . import rules
from .grader import grade_healthbench
from .loader import load_healthbench
from .official import PROMPTS, grade_healthbench_official

TASK_SPEC = (
    "Task: answer health questions from members of the public or clinicians in a multi-turn chat. "
    "Good answers are medically accurate and current; put safety first (recognise emergencies and say "
    "when and where to seek care); ask for missing context that would change the advice, or answer "
    "conditionally; match depth and vocabulary to the user (lay person or professional); are complete "
    "on what matters without burying it; hedge when evidence is uncertain; respect the user's stated "
    "situation, country and constraints. A rubric for one conversation should check the specific facts, "
    "warnings, referrals and follow-up questions this conversation calls for, and name harmful content "
    "to avoid."
)

_BLOB = "https://openaipublic.blob.core.windows.net/simple-evals/healthbench"

# The sha256 of each dated file as several independent projects pinned it (the files are not in a git
# repository we could hash). Exact sizes are not published; the bounds are about 3x the expected size
# (a 500-conversation extract with every field is 5.7 MB).
SOURCE = DataSource(
    upstream="openai/simple-evals (dated files)",
    licence="MIT",
    homepage="https://github.com/openai/simple-evals",
    splits=(
        Split("all", (DataFile("oss_eval.jsonl", f"{_BLOB}/2025-05-07-06-14-12_oss_eval.jsonl",
                               "e99dd3c6372c10d6fcc5e385c5fae69d0dd40392dae56836ef9493ae324ecd2f",
                               max_size=160 << 20),),
              "oss_eval.jsonl", "all 5,000 conversations", records=5000),
        Split("hard", (DataFile("hard.jsonl", f"{_BLOB}/hard_2025-05-08-21-00-10.jsonl",
                                "b0320430e5cd974e746585594c1dd10b5a3fc2aff9c72b26106c2c4a069d74e9",
                                max_size=64 << 20),),
              "hard.jsonl", "the 1,000 hardest conversations", records=1000),
        Split("consensus", (DataFile("consensus.jsonl", f"{_BLOB}/consensus_2025-05-09-20-00-46.jsonl",
                                     "fabe37553327238928b05357d8b309737b5d426d6dee432a3376da618d0969d6",
                                     max_size=128 << 20),),
              "consensus.jsonl", "3,671 conversations, criteria validated by several physicians", records=3671),
    ),
)


def summarise(graded: Sequence[GradeResult]) -> tuple[float, dict[str, Any]]:
    fractions = [r.details["fraction"] for r in graded]
    return rules.healthbench_aggregate(fractions), {"unclipped_mean": mean(fractions) * 100}


BENCHMARK = Benchmark(
    name="healthbench", label="HealthBench", scheme="healthbench", load=load_healthbench,
    grade=grade_healthbench, task_spec=TASK_SPEC, source=SOURCE, summarise=summarise,
    headline="mean rubric score over conversations, clipped to [0, 100]",
    official_prompts=PROMPTS, official=grade_healthbench_official, grader_calls=per_item_calls,
    # a conversation's own score is not clipped: met negative-point criteria take it below 0, without bound
    question_range=(-math.inf, 100.0),
)
