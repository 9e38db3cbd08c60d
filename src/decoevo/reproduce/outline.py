"""The plan before any data is read (`--plan-only`): per table its methods and runs, training calls and
dollars at the preset's sizes, an expected wall time."""

from __future__ import annotations

from collections.abc import Mapping

from ..engine.config import deep_merge
from ..engine.estimate import estimate_calls
from ..engine.sharing import run_share, seed_training
from ..engine.tokens import role_tokens
from ..methods import get_method
from .plan import (
    ABLATIONS,
    CONTROLS,
    COST_METHODS,
    HEALTHBENCH,
    MAIN,
    PAIRED,
    TOPPED_UP,
    TRACKED,
    TRANSFERS,
    ReproducePlan,
)
from .projection import price_of

TABLE_METHODS: Mapping[str, tuple[str, ...]] = {
    "1": MAIN, "2": ("decoevo", *ABLATIONS), "3": ("skillopt", "decoevo", *CONTROLS), "4": COST_METHODS,
    "5": TRACKED, "fig3": TRACKED,
}
# Sequential model-call waves (a wave's calls run concurrently): an inner step solves the batch, judges it,
# rewrites, then solves and judges the challenger on V_s; an outer round adds about six (rubrics, audits,
# the rewrite, the candidate's verification). Counted from the engine's loop, not measured on an API.
WAVES_PER_STEP, WAVES_PER_ROUND = 5, 6
CALL_LATENCY_S = 4.0  # an assumption for a hosted model's reply of a few hundred tokens, said in the plan


def outline(rp: ReproducePlan, workers: int | None = None) -> list[str]:
    """The plan before any data is read: per table its methods, benchmarks and runs; the distinct runs;
    training calls and dollars at the preset's sizes; an expected wall time under `CALL_LATENCY_S` with
    `workers` runs at once (default: the machine's cores, as a local sweep). Nothing is loaded or written."""
    import os

    from ..engine.config import config_from_dict
    from ..presets import PRESETS

    seeds = ", ".join(map(str, rp.seeds))
    lines = [f"seeds {seeds} ({len(rp.seeds)}), preset {rp.preset}, solver {rp.solver.model}, "
             f"grader {rp.grader.model if rp.grader else rp.solver.model + ' (self-graded)'}"]
    for table in rp.tables:
        benches = [b for b in rp.benchmarks if b == HEALTHBENCH or table in ("1", "5")]
        methods = TABLE_METHODS[table]
        n = len(methods) * len(benches) * len(rp.seeds)
        extra = ""
        if table == "1":
            transfers = [TRANSFERS[b] for b in benches if b in TRANSFERS]
            extra = f"; their final skills evaluated on {', '.join(transfers)}" if transfers else ""
        label = "Figure 3" if table == "fig3" else f"Table {table}"
        lines.append(f"{label}: {', '.join(methods)} on {', '.join(benches)} = {n} runs{extra}")
    price = price_of(rp.solver)
    training, path_s, runs = 0, 0.0, 0
    dollars: float | None = 0.0
    for bench in rp.benchmarks:
        rows = []
        for method in rp.methods_for(bench):
            raw = deep_merge(PRESETS[rp.preset], dict(rp.shared))
            config = config_from_dict(deep_merge(raw, {"method": method, "data": {"path": "not-read.jsonl"}}))
            est = estimate_calls(get_method(method), config.hyper, config.splits)
            matched = method in (*TOPPED_UP, "budget_matched") and "decoevo" in rp.methods_for(bench)
            if matched:
                est = estimate_calls(get_method(PAIRED), config.hyper, config.splits)
            rows.append((est, run_share(get_method(method), config.hyper, config.splits,
                                        est.expected if matched else None)))
        paid = seed_training([share for _, share in rows])  # the runs of one seed share requests
        for est, share in rows:
            runs += len(rp.seeds)
            training += round(paid[share.method] * len(rp.seeds))
            usd = est.dollars(lambda role, p, c: price(p, c), role_tokens(config.hyper))
            if usd is not None and est.expected:
                usd *= paid[share.method] / est.expected
            dollars = None if dollars is None or usd is None else dollars + usd * len(rp.seeds)
            waves = est.steps * WAVES_PER_STEP + est.expected_rounds * WAVES_PER_ROUND
            path_s += waves * CALL_LATENCY_S * len(rp.seeds)
    at_once = max(1, min(runs, workers or os.cpu_count() or 1))
    money = ("dollars unknown (a model has no price: set input/output_price_per_mtok)" if dollars is None
             else f"about ${dollars:,.2f}" if dollars else "no dollars (free models)")
    lines.append(f"{runs} distinct runs (a method shared by tables runs once); training ~{training:,} paid calls, "
                 f"{money} at the preset's sizes (evaluation is projected once the data are fetched)")
    lines.append(f"expected training wall time ~{path_s / at_once / 3600:.1f} h with {at_once} run(s) at once, at "
                 f"{CALL_LATENCY_S:.0f} s per model call (an assumption: a hosted model's reply of a few hundred "
                 "tokens); evaluation adds to it")
    missing = [b for b in (*rp.benchmarks, *(TRANSFERS[b] for b in rp.benchmarks if b in TRANSFERS))
               if b not in rp.data]
    if missing:
        lines.append(f"data not fetched yet: {', '.join(missing)} (`decoevo data fetch {' '.join(missing)}`)")
    return lines
