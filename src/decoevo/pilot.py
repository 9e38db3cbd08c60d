"""`decoevo pilot`: choose ε, τ_tie and K on a run configuration's pilot split, before any run.

Writes OUT/pilot.json (one entry per data file, seed and split sizes: the choice, its evidence and the
criteria) and logs its model calls under OUT/pilot/ (calls.jsonl, and ledger.json: every pilot measured
into OUT, killed ones included), apart from every run: the pilot search is a one-time cost, excluded from
a run's cost as in the paper's Table 4. `decoevo run --pilot`
and `decoevo sweep --pilot` apply the entry matching each run's data, seed and split sizes; an explicit
setting of the same hyperparameter wins. The pilot split is cut first and disjoint from all others, so a run
with the same data, seed and split sizes never trains, gates or tests on a pilot question.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .domain import Question
from .engine.config import RunConfig, config_from_dict, deep_merge
from .engine.context import EngineContext
from .engine.pilot_selection import PilotChoice, PilotEvidence, PilotGrid, candidate_deltas, rollout_scores, select
from .engine.run import call_line, initial_state, spec_lookup
from .errors import ConfigError
from .lm import LM, UsageLedger
from .methods import get_method
from .rundir import RequestLog, RunWriter, settle_interrupted, settled_calls
from .tasks.load import load_questions
from .tasks.splits import make_splits

PILOT_FILE = "pilot.json"
PILOT_DIR = "pilot"  # the pilot's own call log and ledger
PILOT_STEPS = 3  # SkillOpt inner steps measured on the pilot split
CHOSEN = ("epsilon", "tau_tie", "audit_every")
CRITERIA = {
    "epsilon": "smallest grid value whose estimated false acceptance of a no-better candidate by the solver gate "
               "is at most 10% (null spread from paired rollouts of one skill, over |V_s| questions)",
    "tau_tie": "smallest grid value at which at least half of the pilot questions fill the H near-tie pairs",
    "audit_every": "largest grid value not above the expected steps until M consecutive stalls at the chosen ε",
}


class PilotEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    data: str  # absolute path of the questions
    seed: int
    splits: dict[str, int]
    pilot_ids: list[str]
    choice: dict[str, float | int]
    evidence: dict[str, Any]
    criteria: dict[str, str]
    usage: dict[str, Any]  # the pilot's own spend (never part of a run's ledger)


class PilotFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format_version: int = 1
    grid: PilotGrid = PilotGrid()
    entries: list[PilotEntry] = Field(default_factory=list)


def _pilot_split(config: RunConfig, questions: Sequence[Question] | None = None) -> list[Question]:
    if config.splits.pilot < 2:
        raise ConfigError("the pilot split needs at least 2 questions; set splits.pilot (e.g. --set splits.pilot=4) "
                          "and give the runs the same split sizes, so the pilot questions stay out of them")
    if questions is None:
        questions = load_questions(config.data)
    return list(make_splits(questions, config.splits, config.seed, required=["pilot"]).pilot)


def _key(data: str, seed: int, splits: dict[str, int]) -> tuple[str, int, str]:
    return str(Path(data).resolve()), seed, json.dumps(splits, sort_keys=True)


def entry_for(config: RunConfig) -> tuple[str, int, str]:
    return _key(config.data.path, config.seed, config.splits.model_dump())


def evidence_dict(evidence: PilotEvidence, choice: PilotChoice) -> dict[str, Any]:
    def keyed(d: dict[float, Any]) -> dict[str, Any]:
        return {str(k): v for k, v in d.items()}

    return {
        "rollout_scores": {k: list(v) for k, v in evidence.rollout_scores.items()},
        "candidate_deltas": list(evidence.candidate_deltas),
        "gate_size": evidence.gate_size, "pairs_per_question": evidence.pairs_per_question,
        "max_stalls": evidence.max_stalls, "noise_sd": choice.noise_sd,
        "false_accept_by_epsilon": keyed(choice.false_accept),
        "candidate_accept_by_epsilon": keyed(choice.candidate_accept),
        "tie_quota_share_by_tau": keyed(choice.tie_quota_share),
        "mean_tie_pairs_by_tau": keyed(choice.mean_tie_pairs),
        "stall_probability": choice.stall_probability, "steps_to_stall_trigger": choice.steps_to_stall_trigger,
    }


async def run_pilot_async(config: RunConfig, out_dir: Path | str, *, grid: PilotGrid | None = None,
                          steps: int = PILOT_STEPS, lm: LM | None = None) -> PilotEntry:
    """Measure on `config`'s pilot split, choose, and add (or replace) its entry in OUT/pilot.json."""
    out = Path(out_dir)
    grid = grid or (read_pilot(out / PILOT_FILE).grid if (out / PILOT_FILE).is_file() else PilotGrid())
    pilot = [q.view() for q in _pilot_split(config)]
    writer = RunWriter(out / PILOT_DIR)
    (out / PILOT_DIR).mkdir(parents=True, exist_ok=True)
    owns = lm is None
    lm = lm or LM(config.lm)
    settle_interrupted(out / PILOT_DIR)  # requests in flight when an earlier pilot was killed: billed
    journal = RequestLog(out / PILOT_DIR) if owns else None
    if journal is not None:  # each paid request on disk before it leaves (a caller's own LM keeps its own record)
        lm.journal = journal
    lm.on_call = lambda record: writer.record_call(call_line(record))
    method = get_method("skillopt")  # the gates measured are SkillOpt's (the solver gate) and the audit's pairs
    spec_for = spec_lookup(config)
    ctx = EngineContext(lm, config.hyper, method, writer, config.seed, spec_for)
    state = initial_state(config, method, spec_for(pilot[0].task))
    try:
        scores = await rollout_scores(ctx, pilot, state.solver, state.generator)
        deltas = await candidate_deltas(ctx, pilot, state.solver, state.generator, steps)
    finally:
        writer.close()  # the call log it kept open
        if journal is not None:
            journal.close()
            # Every pilot measured into OUT, killed ones included, from the settled call log: one process's
            # ledger in memory would leave out the calls of the pilots killed before it.
            ledger = UsageLedger.of_calls(settled_calls(out / PILOT_DIR), lm.cost_of)
        else:
            ledger = lm.ledger
        writer.write_json("ledger.json", ledger.to_dict())
        if owns:
            await lm.aclose()
    h = config.hyper
    evidence = PilotEvidence(scores, deltas, config.splits.solver_gate, h.pairs_per_question, h.max_stalls)
    choice = select(evidence, grid)
    entry = PilotEntry(data=str(Path(config.data.path).resolve()), seed=config.seed,
                       splits=config.splits.model_dump(), pilot_ids=[q.id for q in pilot], choice=choice.hyper(),
                       evidence=evidence_dict(evidence, choice), criteria=CRITERIA,
                       usage=dict(lm.ledger.to_dict()["total"]))  # type: ignore[call-overload]
    previous = read_pilot(out / PILOT_FILE).entries if (out / PILOT_FILE).is_file() else []
    kept = [e for e in previous if _key(e.data, e.seed, e.splits) != entry_for(config)]
    RunWriter(out).write_json(PILOT_FILE, PilotFile(grid=grid, entries=[*kept, entry]).model_dump(mode="json"))
    return entry


def run_pilot(config: RunConfig, out_dir: Path | str, **kwargs: Any) -> PilotEntry:
    return asyncio.run(run_pilot_async(config, out_dir, **kwargs))


def read_pilot(path: Path | str) -> PilotFile:
    """A pilot file (or a directory holding pilot.json); a one-line ConfigError when it is not one."""
    path = Path(path)
    if path.is_dir():
        path = path / PILOT_FILE
    if not path.is_file():
        raise ConfigError(f"{path}: pilot file not found; make one with `decoevo pilot DIR`")
    try:
        return PilotFile.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"{path}: not a pilot file ({where}: {first['msg']})") from None


def with_pilot(config: RunConfig, path: Path | str, explicit: Collection[str] = (),
               questions: Sequence[Question] | None = None) -> RunConfig:
    """`config` with the pilot's ε, τ_tie and K for its data, seed and split sizes; `explicit` hyperparameters
    (set by the user) keep their value. Refuses a pilot measured on other questions (`questions`: the data,
    when the caller has it loaded)."""
    pilot = read_pilot(path)
    match = next((e for e in pilot.entries if _key(e.data, e.seed, e.splits) == entry_for(config)), None)
    if match is None:
        have = "; ".join(f"{Path(e.data).name} seed {e.seed}" for e in pilot.entries) or "no entries"
        raise ConfigError(f"{path}: no pilot for {Path(config.data.path).name} seed {config.seed} with these split "
                          f"sizes (it has: {have}); run `decoevo pilot` with the run's data, seed and splits")
    if [q.id for q in _pilot_split(config, questions)] != match.pilot_ids:
        raise ConfigError(f"{path}: the pilot questions of {config.data.path} changed since the pilot; run it again")
    chosen = {k: v for k, v in match.choice.items() if k in CHOSEN and k not in explicit}
    hyper = {k: int(v) if k == "audit_every" else v for k, v in chosen.items()}
    return config_from_dict(deep_merge(config.model_dump(mode="json"), {"hyper": hyper}), source=str(path))
