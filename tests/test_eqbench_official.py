"""EQ-Bench Creative Writing with its official judging prompt (a synthetic stand-in of the same shape):
filled as upstream fills it, the reply read with the official patterns, the piece score over every parsed
entry with the lower-is-better criteria inverted; the Elo headline is stated as not implemented."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from decoevo.benchmarks import BENCHMARKS, grade, load_eqbench_cw
from decoevo.benchmarks.eqbench_cw.official import PROMPTS, parse_scores
from decoevo.benchmarks.record import OfficialPrompts
from decoevo.lm.types import BackendRequest

SYNTHETIC = OfficialPrompts(
    "eqbench_cw",
    {
        "judge": (
            "SYN {{literal braces}}\nP={writing_prompt}\nR={test_model_response}\nLOW: {lower_is_better_criteria}\n"
            "C:\n{creative_writing_criteria}"
        )
    },
    PROMPTS,
)


def _bench(tmp_path: Path) -> Path:
    (tmp_path / "creative_writing_prompts_v3.json").write_text(
        json.dumps(
            {
                "7": {
                    "category": "c",
                    "title": "t",
                    "writing_prompt": "Write about <SEED> at dusk.",
                    "seed_modifiers": ["a fox", "a lamp"],
                }
            }
        ),
        encoding="utf-8",
    )
    (tmp_path / "creative_writing_criteria.txt").write_text("Imagery\nPurple Prose\nVoice\nTell-Don't-Show\n")
    (tmp_path / "negative_criteria.txt").write_text("Tell-Don't-Show\nPurple Prose\n")
    return tmp_path


async def test_official_judge_prompt_and_parse(make_lm, tmp_path: Path) -> None:
    question = load_eqbench_cw(_bench(tmp_path))[1]
    assert question.turns[0].content == "Write about a lamp at dusk."
    replies = iter(
        [
            "An analysis without any score.",  # no criterion readable: asked again
            "[Analysis]\nChapter 1: 3 pages of mood.\n[Scores]\nImagery: 16\nPurple Prose: [4]\n"
            "Voice: Score 12\nTell-Don't-Show: 30\n",
        ]
    )
    prompts: list[str] = []

    def script(request: BackendRequest) -> str:
        assert [m.role for m in request.messages] == ["user"] and request.json_schema is None
        assert request.params.temperature == 0.0 and request.params.max_tokens == 1000
        prompts.append(request.messages[0].content)
        return next(replies)

    lm, _ = make_lm(script)
    result = await grade(lm, question, "The piece.", official=SYNTHETIC)
    assert prompts[0] == (
        "SYN {literal braces}\nP=Write about <SEED> at dusk.\nR=The piece.\n"
        "LOW: Tell-Don't-Show, Purple Prose\nC:\n- Imagery\n- Purple Prose\n- Voice\n- Tell-Don't-Show"
    )
    # parsed: Chapter 1 = 3 (a stray entry, counted as upstream counts it), Imagery 16, Purple Prose 4 -> 16,
    # Voice 12; Tell-Don't-Show 30 is above 20 and dropped
    assert result.score == pytest.approx((3 + 16 + 16 + 12) / 4 * 5)
    assert [i.value for i in result.items] == [16.0, 4.0, 12.0, None]
    assert result.details["entries_not_criteria"] == ["Chapter 1"]


async def test_a_reply_with_no_criterion_leaves_the_piece_ungraded(make_lm, tmp_path: Path) -> None:
    question = load_eqbench_cw(_bench(tmp_path))[0]
    lm, backend = make_lm(lambda request: "Nothing to score here: 5 stars")
    result = await grade(lm, question, "Another piece.", official=SYNTHETIC)
    assert result.score is None and len(backend.calls) == 3 and {i.error for i in result.items} == {"parse"}


def test_parse_patterns_and_the_elo_statement() -> None:
    assert parse_scores("A: 3\nB: [7.5]\nC: Score 21\nD: -2") == {"A": 3.0, "B": 7.5, "D": -2.0}
    note = BENCHMARKS["eqbench_cw"].not_implemented
    assert "Elo" in note and "not implemented" in note


def test_the_unimplemented_elo_headline_is_said_next_to_the_score(tmp_path: Path, monkeypatch) -> None:
    from typer.testing import CliRunner

    from decoevo.cli import app
    from decoevo.testing.fake_openai import FakeOpenAI, Reply
    from decoevo.testing.server import serve_app
    from decoevo.testing.toy_server import toy_run_args, toy_server, write_toy_questions

    runner = CliRunner()
    monkeypatch.setenv("DECOEVO_CACHE", str(tmp_path / "cache.sqlite"))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "eq").mkdir()
    bench = _bench(tmp_path / "eq")
    grader = FakeOpenAI(lambda body, n: Reply(content=json.dumps({"rationale": "r", "scores": [10, 10, 10, 10]})))
    with serve_app(toy_server().app()) as url, serve_app(grader.app()) as grader_url:
        args = toy_run_args(f"{url}/v1", write_toy_questions(tmp_path / "toy.jsonl"), tmp_path / "runs", "r", steps=1)
        assert runner.invoke(app, args).exit_code == 0
        run = tmp_path / "runs" / "r"
        result = runner.invoke(
            app,
            [
                "eval",
                str(run),
                "--data",
                str(bench),
                "--format",
                "eqbench_cw",
                "--grader-base-url",
                f"{grader_url}/v1",
                "--grader-model",
                "g",
            ],
        )
    said = " ".join(result.output.split())
    assert result.exit_code == 0 and "pairwise Elo" in said and "not implemented" in said, result.output
    assert runner.invoke(app, ["report", str(run), "-o", str(tmp_path / "r.html")]).exit_code == 0
    assert "a pairwise Elo ranking against reference models" in (tmp_path / "r.html").read_text()
