"""A run's `--max-cost` over its post-run steps too (`decoevo sweep --max-cost`).

Training stops at the run's cap (Budget.max_cost, lm/budget.py), but a cell's evaluation runs in its own LM
with no budget: `sweep --max-cost 0.02` trained for $0.0116 and then graded for $0.11. Without an experiment's
cap over it (`decoevo reproduce` sets one, lm/spend.py), a cell's post-run steps run under a log of their own,
RUN/eval/spend.log, capped at the run's `max_cost` and begun at what the run's records say it paid so far
(training and earlier evaluations, rundir/paid.py): training and grading together stop at the cap.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from ..engine.config import load_config
from ..lm.spend import CAP_ENV, FILE_ENV, ID_ENV, add_spent, begin, read_spend
from ..rundir.records import EVAL_DIR

SPEND_FILE = "spend.log"  # under RUN/eval/


@contextlib.contextmanager
def run_cap(run_dir: Path) -> Iterator[None]:
    """Post-run steps under the run's `max_cost`, when it has one and no experiment's cap governs already."""
    if os.environ.get(FILE_ENV) or not (run_dir / "config.yaml").is_file():
        yield
        return
    config = load_config(run_dir / "config.yaml")
    cap = config.budget.max_cost
    if cap is None:
        yield
        return
    from ..lm.pricing import cost_of_models
    from ..rundir.paid import paid_in_records

    path = run_dir / EVAL_DIR / SPEND_FILE
    # the grader's calls are priced at the dearest of the run's models (its spec is the evaluation's to pick)
    paid = paid_in_records(run_dir, cost_of_models(config.lm.models))
    logged = read_spend(path)
    if paid > logged + 1e-9 * max(1.0, paid):
        add_spent(path, paid - logged)
    wanted = {FILE_ENV: str(path), CAP_ENV: repr(cap), ID_ENV: begin(path)}
    before = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for key, value in before.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value

