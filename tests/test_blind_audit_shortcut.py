"""The blind audit's short cut and its reply schema: with `second_order_if_decisive`, an "equivalent" first
order ends the comparison after one call (the pair is equivalent whatever the second order would say), and a
stage-2 answer that leaves out why the rubric missed it, or the principle, is refused (repaired or failed as a
parse error, never kept)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from decoevo.domain import Question
from decoevo.lm import GenParams
from decoevo.roles.contrastive_audit import PreferenceOut, RevealOut, blind_preference

VIEW = Question.from_text("q1", "My knee hurts after running. What should I do?", task="healthbench").view()


class _Equivalent:
    """A stage-1 auditor that finds the first order equivalent and then prefers response A."""

    def __init__(self) -> None:
        self.calls, self.ledger = 0, None

    async def structured(self, messages, schema, *, role, params):  # type: ignore[no-untyped-def]
        self.calls += 1
        preference = "equivalent" if self.calls == 1 else "A"
        return schema(rationale=f"call {self.calls}: both say the same", preference=preference)

    def model_for(self, role):  # type: ignore[no-untyped-def]
        return "default"


@pytest.mark.parametrize(("shortcut", "calls"), [(True, 1), (False, 2)])
async def test_an_equivalent_first_order_ends_the_short_cut_after_one_call(shortcut: bool, calls: int) -> None:
    lm = _Equivalent()
    won, rationale = await blind_preference(lm, VIEW, "one answer", "another answer",  # type: ignore[arg-type]
                                            params=GenParams(), second_order_if_decisive=shortcut)
    assert won is None and lm.calls == calls
    assert rationale.startswith("call 1:")


def test_a_stage2_answer_without_its_reason_or_principle_is_refused() -> None:
    with pytest.raises(ValidationError):
        RevealOut(why_missed="the rubric never asked for a follow-up plan", principle="")
    with pytest.raises(ValidationError):
        RevealOut(why_missed="", principle="ask the patient for a follow-up plan")
    with pytest.raises(ValidationError):
        PreferenceOut(rationale="", preference="A")
    assert RevealOut(why_missed="missed it", principle="ask for a plan").principle == "ask for a plan"
