"""ResearchQA (2025): research questions mined from surveys, with rubric items graded by coverage."""

from __future__ import annotations

from ..record import Benchmark, DataFile, DataSource, Split
from .grader import grade_researchqa
from .loader import HUB_REPO, load_researchqa
from .official import PROMPTS, grade_researchqa_official

TASK_SPEC = (
    "Task: answer a research question in a scientific field the way a survey-style literature review "
    "would. Good answers cover the key concepts, methods, results, comparisons and open problems the "
    "question touches, cite or name relevant work correctly, state limitations and trade-offs, and stay "
    "precise. A rubric should list the specific topics, findings and comparisons a complete answer "
    "must include for this question, plus expectations about evidence and accuracy."
)

_HUB = f"https://huggingface.co/datasets/{HUB_REPO}/resolve/main"

# Published on the Hugging Face Hub only; no revision was pinned offline, so `main` and no checksum.
SOURCE = DataSource(
    upstream=f"huggingface.co/datasets/{HUB_REPO} (main; not pinned)",
    licence="see the dataset card",
    homepage=f"https://huggingface.co/datasets/{HUB_REPO}",
    splits=(
        Split("test", (DataFile("test.json", f"{_HUB}/test.json", None),), "test.json", "the test split"),
        Split("valid", (DataFile("valid.json", f"{_HUB}/valid.json", None),), "valid.json",
              "the validation split"),
    ),
)

BENCHMARK = Benchmark(
    name="researchqa", label="ResearchQA", scheme="researchqa", load=load_researchqa, grade=grade_researchqa,
    task_spec=TASK_SPEC, source=SOURCE, headline="mean of (coverage label - 1) / 4, x100",
    official_prompts=PROMPTS, official=grade_researchqa_official,
)
