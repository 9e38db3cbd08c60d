"""Prompt injection on the real embedded model: a few variants of a real solver answer through the real
judge and auditors (9 model calls). No shift size is asserted (a 135M model may well be moved, and
docs/reliability.md reports by how much); the report must be complete and consistent."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

import pytest

from decoevo.benchmarks import load_healthbench
from decoevo.domain import Skill
from decoevo.lm import LM, GenParams, LMConfig, RequestCache
from decoevo.reliability.injection import FAKE_RATIONALE, Family, Role, Subject, reference_rubric, variant
from decoevo.reliability.injection_eval import (
    SCALE,
    Settings,
    markdown_table,
    run_cases,
    score_case,
    summarise,
)
from decoevo.roles.solve import solve
from decoevo.tasks.specs import INITIAL_SOLVER_SKILL

from .real_model import requires_model

# slow (about 40 s): the default suite has the real judge and auditors on the embedded model in
# test_sweep_report_real.py and test_server_run_real.py; the injection report's arithmetic, failures included,
# is checked on scripted models in test_injection.py
pytestmark = [pytest.mark.real_model, pytest.mark.slow, requires_model]

PLAN = [(Role.JUDGE, Family.FAKE_VERDICT), (Role.CONTRASTIVE, Family.PREFER_ME),
        (Role.STRUCTURAL, Family.DELIMITER_ESCAPE)]
# The comparison's other side; written here to save a generation (the attacked side is the solver's).
OPPONENT = "Rest, drink fluids, and see a doctor if it does not improve within a few days or gets worse."


async def test_injected_variants_through_the_real_roles_give_a_complete_consistent_report(tmp_path):
    sample = Path(str(files("decoevo") / "data" / "healthbench_sample.jsonl"))
    question = min(load_healthbench(sample), key=lambda q: len(q.as_text()))
    lm = LM(LMConfig(), cache=RequestCache(tmp_path / "c.sqlite"))
    settings = Settings()
    try:
        answer = await solve(lm, question.view(), Skill(kind="solver", version=0, text=INITIAL_SOLVER_SKILL),
                             params=GenParams(temperature=0.0, max_tokens=64))
        assert answer.text.strip()
        subject = Subject(question, answer.text, OPPONENT, reference_rubric(question, 2), "solver")
        corpus = [variant(role, None, subject) for role in dict.fromkeys(r for r, _ in PLAN)]
        corpus += [variant(role, family, subject) for role, family in PLAN]
        outcomes = await run_cases(lm, corpus, settings)
        # same role, same deterministic settings: scoring the clean judge case again gives the same outcome
        assert await score_case(lm, corpus[0], settings) == outcomes[0]
    finally:
        await lm.aclose()

    rows = summarise(outcomes)
    assert [(r.role, r.family) for r in rows] == [(role.value, family.value) for role, family in PLAN]
    for o in outcomes:
        assert (o.value is None) == (o.failure is not None) == (o.maximal is None)
        if o.failure is not None:
            assert o.failure in {"parse", "refusal", "infrastructure"} and o.error
            continue
        assert o.value is not None
        lo, hi = SCALE[Role(o.role)]
        assert lo <= o.value <= hi
        assert o.maximal == (o.value == hi)
        if o.role == "judge":  # whatever the model did, the planted verdict is not what was parsed
            assert not (set(o.detail["rationales"]) == {FAKE_RATIONALE} and set(o.detail["levels"]) == {4})
    clean = {o.role: o for o in outcomes if o.family == "clean"}
    for r, o in zip(rows, [o for o in outcomes if o.family != "clean"], strict=True):
        assert r.units == 1
        both = clean[r.role].value is not None and o.value is not None
        assert r.paired == (1 if both else 0)
        assert sum(r.clean_failures.values()) == (clean[r.role].failure is not None)
        assert sum(r.injected_failures.values()) == (o.failure is not None)
        if both:
            assert r.shift is not None and r.shift.mean_diff == pytest.approx(o.value - clean[r.role].value)  # type: ignore[operator]
            assert r.shift.mean_diff == pytest.approx(r.mean_injected - r.mean_clean)  # type: ignore[operator]
            assert r.max_rate_injected == (1.0 if o.maximal else 0.0)
        else:
            assert r.shift is None and r.mean_injected is None
    assert len(markdown_table(rows).splitlines()) == 2 + len(rows)
