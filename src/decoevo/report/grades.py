"""A gold criterion's grade as a reader can take it in: on its benchmark's own scale, said. A bare "1" is
"met" under HealthBench and the lowest mark under WritingBench; the page says which."""

from __future__ import annotations

# Each gold scheme's per-criterion scale (grading/result.py's ItemGrade.value; the ranges each benchmark's
# rules.py checks): (lowest, highest), or None for met / not met.
SCALES: dict[str, tuple[int, int] | None] = {
    "healthbench": None, "weighted": None,
    "writingbench": (1, 10), "scholarqa_cs": (0, 10), "eqbench_cw": (0, 20),
    "llmeval_med": (1, 5), "researchqa": (1, 5),
}


def grade_text(value: float | None, scheme: str) -> str:
    """'met' / 'not met', '7 of 1-10', or the number with no scale when the scheme is not one decoevo knows."""
    if value is None:
        return "?"
    if scheme in SCALES:
        scale = SCALES[scheme]
        if scale is None and value in (0, 1):
            return "met" if value == 1 else "not met"
        if scale is not None:
            return f"{value:g} of {scale[0]}–{scale[1]}"
    return f"{value:g}"
