"""A matched control's budget (engine/run.py, `resolve_budget` and `paired_calls`), pure: matched on usage
(the default) it takes the paired run's calls and tokens, and its dollars only when that run was priced
and paid something (a run on a free model gives no dollar cap, which would refuse every call); an explicit
cap wins; and only a matched run (Budget-Matched or a top-up, with `match_run`) stops at the paired usage.
Each case failed a mutant that the mutation bench found the older tests let pass (issue 46.2)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from decoevo.engine.config import config_from_dict
from decoevo.engine.run import paired_calls, resolve_budget
from decoevo.lm import UsageLedger
from decoevo.methods import METHODS


def _paired(tmp_path: Path, name: str, cost: float | None) -> Path:
    run = tmp_path / name
    run.mkdir()
    ledger = UsageLedger()
    for _ in range(3):
        ledger.record_call("judge", "m", 900, 100, 0.0, cost_usd=cost)
    (run / "ledger.json").write_text(ledger.to_json(), encoding="utf-8")
    return run


def _config(method: str, **budget: Any):  # type: ignore[no-untyped-def]
    return config_from_dict({"method": method, "data": {"path": "unused.jsonl"}, "budget": budget})


def test_a_control_matched_on_usage_takes_the_paired_calls_tokens_and_paid_dollars(tmp_path: Path) -> None:
    priced, free, unpriced = (_paired(tmp_path, "priced", 0.25), _paired(tmp_path, "free", 0.0),
                              _paired(tmp_path, "unpriced", None))
    config = _config("budget_matched", match_run=str(priced))
    budget = resolve_budget(config, METHODS["budget_matched"])
    assert (budget.max_calls, budget.max_tokens, budget.max_cost) == (3, 3000, 0.75)
    for other in (free, unpriced):  # nothing paid, or no price: no dollar cap (a $0 cap refuses every call)
        budget = resolve_budget(_config("budget_matched", match_run=str(other)), METHODS["budget_matched"])
        assert (budget.max_calls, budget.max_tokens, budget.max_cost) == (3, 3000, None), other
    explicit = resolve_budget(_config("budget_matched", match_run=str(priced), max_calls=2, max_cost=0.5),
                              METHODS["budget_matched"])
    assert (explicit.max_calls, explicit.max_tokens, explicit.max_cost) == (2, 3000, 0.5)


def test_only_a_matched_run_stops_at_its_paired_runs_usage(tmp_path: Path) -> None:
    paired = _paired(tmp_path, "paired", 0.25)
    assert paired_calls(_config("budget_matched", match_run=str(paired)), METHODS["budget_matched"]) == 3
    assert paired_calls(_config("skillopt", match_run=str(paired), top_up=True), METHODS["skillopt"]) == 3
    # a budget taken from another run's ledger is a cap, not a target: the run's own schedule says its calls
    assert paired_calls(_config("skillopt", match_run=str(paired)), METHODS["skillopt"]) is None
    assert paired_calls(_config("budget_matched", max_calls=5), METHODS["budget_matched"]) is None
    assert paired_calls(_config("budget_matched", match_run=str(tmp_path / "none")), METHODS["budget_matched"]) is None
