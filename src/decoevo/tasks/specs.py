"""Structural-audit specifications π_str per task family, and the initial skills.

Each specification is written from the public description of the task (what the benchmark says it
measures), never from any question's gold rubric. Users pass their own with `--task-spec FILE`.
"""

from __future__ import annotations

STRUCTURAL_SPECS: dict[str, str] = {
    "healthbench": (
        "Task: answer health questions from members of the public or clinicians in a multi-turn chat. "
        "Good answers are medically accurate and current; put safety first (recognise emergencies and say "
        "when and where to seek care); ask for missing context that would change the advice, or answer "
        "conditionally; match depth and vocabulary to the user (lay person or professional); are complete "
        "on what matters without burying it; hedge when evidence is uncertain; respect the user's stated "
        "situation, country and constraints. A rubric for one conversation should check the specific facts, "
        "warnings, referrals and follow-up questions this conversation calls for, and name harmful content "
        "to avoid."
    ),
    "writingbench": (
        "Task: generative writing in many domains (academic, business, legal, literary, education, "
        "advertising), often with explicit requirements on style, format and length, sometimes with source "
        "material. Good responses satisfy every explicit requirement of the query, fit the genre and "
        "audience, are well organised and fluent, accurate where facts are involved, and show substance "
        "rather than filler. A rubric should turn the query's explicit requirements into checkable criteria "
        "and add the genre's implicit quality standards."
    ),
    "researchqa": (
        "Task: answer a research question in a scientific field the way a survey-style literature review "
        "would. Good answers cover the key concepts, methods, results, comparisons and open problems the "
        "question touches, cite or name relevant work correctly, state limitations and trade-offs, and stay "
        "precise. A rubric should list the specific topics, findings and comparisons a complete answer "
        "must include for this question, plus expectations about evidence and accuracy."
    ),
    "generic": (
        "Task: answer the user's request well. Good answers are correct, complete on what matters, safe, "
        "clear, and fitted to the request's explicit constraints and its audience. A rubric should turn the "
        "request's explicit and implicit requirements into specific, checkable criteria with weights that "
        "reflect importance."
    ),
}
STRUCTURAL_SPECS["scholarqa_cs"] = STRUCTURAL_SPECS["researchqa"]
STRUCTURAL_SPECS["llmeval_med"] = STRUCTURAL_SPECS["healthbench"]
STRUCTURAL_SPECS["eqbench_cw"] = STRUCTURAL_SPECS["writingbench"]


def structural_spec(task: str) -> str:
    return STRUCTURAL_SPECS.get(task, STRUCTURAL_SPECS["generic"])


INITIAL_SOLVER_SKILL = (
    "Answer the user's request directly and accurately. Cover what matters most first, be specific, "
    "and state important caveats."
)

INITIAL_GENERATOR_SKILL = (
    "Write criteria that are specific to the question rather than generic. Each criterion checks one "
    "thing. Give the highest weights to what the user needs most."
)
