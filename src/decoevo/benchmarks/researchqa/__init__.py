"""ResearchQA (2025): research questions mined from surveys, with rubric items graded by coverage."""

from __future__ import annotations

from ..record import Benchmark, DataFile, DataSource, Split
from .grader import batch_calls, grade_researchqa
from .loader import HUB_REPO, load_researchqa
from .official import PROMPTS, grade_researchqa_official

TASK_SPEC = (
    "Task: answer a research question in a scientific field the way a survey-style literature review "
    "would. Good answers cover the key concepts, methods, results, comparisons and open problems the "
    "question touches, cite or name relevant work correctly, state limitations and trade-offs, and stay "
    "precise. A rubric should list the specific topics, findings and comparisons a complete answer "
    "must include for this question, plus expectations about evidence and accuracy."
)

# The dataset's commit on the Hub (a fixed revision: `main` may move). No checksum could be obtained, so
# a fetch keeps the files only when they load and hold the published number of questions (dataset card:
# 3,750 test, 703 validation), and records their checksums then.
REVISION = "bf8a4cfef073ecfc0275c57acf8ca960e4dc79d6"
_HUB = f"https://huggingface.co/datasets/{HUB_REPO}/resolve/{REVISION}"

SOURCE = DataSource(
    upstream=f"huggingface.co/datasets/{HUB_REPO}@{REVISION[:7]}",
    licence="see the dataset card",
    homepage=f"https://huggingface.co/datasets/{HUB_REPO}",
    splits=(
        Split("test", (DataFile("test.json", f"{_HUB}/test.json", None, max_size=256 << 20),), "test.json",
              "the test split", records=3750),
        Split("valid", (DataFile("valid.json", f"{_HUB}/valid.json", None, max_size=64 << 20),), "valid.json",
              "the validation split", records=703),
    ),
)


BENCHMARK = Benchmark(
    name="researchqa", label="ResearchQA", scheme="researchqa", load=load_researchqa, grade=grade_researchqa,
    task_spec=TASK_SPEC, source=SOURCE, headline="mean of (coverage label - 1) / 4, x100",
    official_prompts=PROMPTS, official=grade_researchqa_official, grader_calls=batch_calls,
)
