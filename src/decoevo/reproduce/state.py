"""The state file `OUT/reproduce.yaml`: the plan an earlier invocation stored, read back so a rerun resumes it."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from ..engine.config import deep_merge
from ..errors import ConfigError
from ..lm import ModelSpec
from .plan import PAPER_SEEDS, SAMPLE_SEED, SOURCES, TABLES, DataChoice, ReproducePlan

STATE_FILE = "reproduce.yaml"
# The experiment's dollars: every process's reservations and settlements under its cap (lm/spend.py)
SPEND_FILE = "spend.log"


def load_state(out: Path) -> dict[str, Any] | None:
    """The plan an earlier `decoevo reproduce OUT` stored (its flags), for a rerun that resumes it."""
    path = out / STATE_FILE
    if not path.is_file():
        return None
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: not a reproduce plan; remove it or pick another directory")
    return data


def plan_from_state(out: Path, state: Mapping[str, Any], **overrides: Any) -> ReproducePlan:
    merged = deep_merge(dict(state), {k: v for k, v in overrides.items() if v is not None})
    try:
        return ReproducePlan(
            out=out,
            solver=ModelSpec.model_validate(merged["solver"]),
            grader=ModelSpec.model_validate(merged["grader"]) if merged.get("grader") else None,
            data={k: DataChoice(**v) for k, v in (merged.get("data") or {}).items()},
            seeds=tuple(merged.get("seeds") or PAPER_SEEDS),
            benchmarks=tuple(merged.get("benchmarks") or SOURCES),
            tables=tuple(merged.get("tables") or TABLES),
            preset=merged.get("preset") or "paper",
            shared=merged.get("shared") or {},
            allow_self_grading=bool(merged.get("allow_self_grading")),
            transfer_limit=merged.get("transfer_limit"),
            # a stored plan without the key predates sampling: it keeps taking the first N ids
            max_cost=merged.get("max_cost"),
            sample_seed=merged.get("sample_seed", None if state.get("solver") is not None else SAMPLE_SEED),
        )
    except ConfigError as exc:  # a flag's value (it names the flag): the file is named only when there is one
        if (out / STATE_FILE).is_file():
            raise ConfigError(f"{exc} (with the plan stored in {out / STATE_FILE})") from None
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"{out / STATE_FILE}: {exc}") from None



def paid_in_ledgers(out: Path) -> float:
    """The dollars the experiment's ledgers say were paid: every run's training ledger (RUN/ledger.json) and
    evaluation ledger (RUN/eval/ledger.json, every evaluation of the run, interrupted ones included), paid
    calls only (an answer inherited from another run's cache was paid there). What OUT/spend.log must at
    least hold; unreadable ledgers count nothing (they are reported where they are read)."""
    total = 0.0
    for path in sorted(out.rglob("ledger.json")) if out.is_dir() else []:
        try:
            rows = json.loads(path.read_text(encoding="utf-8")).get("rows", [])
        except (OSError, ValueError, AttributeError):
            continue
        for row in rows if isinstance(rows, list) else []:
            usd = row.get("cost_usd") if isinstance(row, dict) else None
            if isinstance(usd, (int, float)) and math.isfinite(usd) and usd > 0:
                total += float(usd)
    return total
