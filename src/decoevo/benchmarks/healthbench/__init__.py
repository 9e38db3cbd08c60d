"""HealthBench (OpenAI, 2025): health conversations graded against physician-written rubrics with
signed points. The official files are dated JSONL files on OpenAI's public blob store."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ...grading.result import GradeResult
from ...grading.rules import mean
from ..record import Benchmark, DataFile, DataSource, Split
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

# The checksums of the official files are not pinned: they were not available offline when this record
# was written. The first fetch records what it downloaded and `decoevo data verify` checks against that.
SOURCE = DataSource(
    upstream="openai/simple-evals (dated files)",
    licence="MIT",
    homepage="https://github.com/openai/simple-evals",
    splits=(
        Split("all", (DataFile("oss_eval.jsonl", f"{_BLOB}/2025-05-07-06-14-12_oss_eval.jsonl", None),),
              "oss_eval.jsonl", "all 5,000 conversations"),
        Split("hard", (DataFile("hard.jsonl", f"{_BLOB}/hard_2025-05-08-21-00-10.jsonl", None),),
              "hard.jsonl", "the 1,000 hardest conversations"),
        Split("consensus", (DataFile("consensus.jsonl", f"{_BLOB}/consensus_2025-05-09-20-00-46.jsonl", None),),
              "consensus.jsonl", "3,671 conversations, criteria validated by several physicians"),
    ),
)


def summarise(graded: Sequence[GradeResult]) -> tuple[float, dict[str, Any]]:
    fractions = [r.details["fraction"] for r in graded]
    return rules.healthbench_aggregate(fractions), {"unclipped_mean": mean(fractions) * 100}


BENCHMARK = Benchmark(
    name="healthbench", label="HealthBench", scheme="healthbench", load=load_healthbench,
    grade=grade_healthbench, task_spec=TASK_SPEC, source=SOURCE, summarise=summarise,
    headline="mean rubric score over conversations, clipped to [0, 100]",
    official_prompts=PROMPTS, official=grade_healthbench_official,
)
