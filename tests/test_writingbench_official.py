"""WritingBench with its official prompts (a synthetic stand-in of the same shape): the criterion shown as
the published checklist entry's Python text, reasoning before "</think>" cut away, the reply read as the
official evaluator reads it, and every criterion needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decoevo.benchmarks import grade, load_writingbench
from decoevo.benchmarks.record import OfficialPrompts
from decoevo.benchmarks.writingbench.official import PROMPTS, parse_score
from decoevo.lm.errors import ConfigError
from decoevo.lm.types import BackendRequest

SYNTHETIC = OfficialPrompts(
    "writingbench", {"system": "SYN-SYS", "grader": "{{x}} Q={query}|R={response}|C={criteria}"}, PROMPTS
)
CHECKLIST = [
    {"name": "Tone", "criteria_description": "Formal «tone»", "1-2": "bad", "9-10": "good"},
    {"name": "Length", "criteria_description": "Under 200 words"},
]


def _question(tmp_path: Path):
    path = tmp_path / "wb.jsonl"
    path.write_text(
        json.dumps({"index": 3, "query": "Write a memo.", "checklist": CHECKLIST}, ensure_ascii=False) + "\n",
        encoding="utf-8",
    )
    return load_writingbench(path)[0]


async def test_official_prompt_filled_and_parsed(make_lm, tmp_path: Path) -> None:
    sent: list[BackendRequest] = []

    def script(request: BackendRequest) -> str:
        sent.append(request)
        score = 8 if "Tone" in request.messages[1].content else 5
        return f"```json\n{json.dumps({'score': score, 'reason': 'r'})}\n```"

    lm, _ = make_lm(script)
    result = await grade(lm, _question(tmp_path), "thinking...</think>\n\nThe memo.", official=SYNTHETIC)
    users = sorted(r.messages[1].content for r in sent)
    assert users == sorted(f"{{x}} Q=Write a memo.|R=The memo.|C={c}" for c in map(str, CHECKLIST))
    assert all(r.messages[0].content == "SYN-SYS" and r.params.temperature == 1.0 for r in sent)
    assert result.score == pytest.approx((8 + 5) / 2 * 10)


async def test_another_benchmarks_official_prompts_are_refused_before_a_call(make_lm, tmp_path: Path) -> None:
    sent: list[BackendRequest] = []
    lm, _ = make_lm(lambda r: sent.append(r) or json.dumps({"score": 8, "reason": "r"}))
    other = OfficialPrompts("eqbench_cw", SYNTHETIC.texts, PROMPTS)
    with pytest.raises(ConfigError, match="official prompts of eqbench_cw given for a writingbench question"):
        await grade(lm, _question(tmp_path), "The memo.", official=other)
    assert sent == []


async def test_every_criterion_is_needed(make_lm, tmp_path: Path) -> None:
    lm, _ = make_lm(
        lambda r: (
            json.dumps({"score": 11, "reason": "r"})
            if "Length" in r.messages[1].content
            else json.dumps({"score": 9, "reason": "r"})
        )
    )
    result = await grade(lm, _question(tmp_path), "Another memo.", official=SYNTHETIC)
    assert result.score is None and result.unknown == 1  # our own prompt would score the question from one of two


def test_parse_as_upstream() -> None:
    assert parse_score('json{"score": 7, "reason": "ok"}|') == 7
    for bad in ('{"score": 7}', '{"score": 0, "reason": "r"}', "7/10", '{"score": 7, "reason": 3}'):
        with pytest.raises(ValueError):
            parse_score(bad)
