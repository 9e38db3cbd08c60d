"""The run directory's files as models, one per file, used by the writer and by every reader.

`FORMAT_VERSION` is written into config-adjacent records (checkpoint, summary, the start event); a run
without it is format 1 (before this module existed) and still reads: every field added since has a
default.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

FORMAT_VERSION = 2

# File names, in one place.
CONFIG = "config.yaml"
SPLITS = "splits.json"
EVENTS = "events.jsonl"
CALLS = "calls.jsonl"
REQUESTS = "requests.jsonl"  # the write-ahead record of paid requests (rundir/requests.py)
LEDGER = "ledger.json"
CHECKPOINT = "checkpoint.json"
SUMMARY = "summary.json"
FINAL_SKILL = "final_solver_skill.md"
QUESTIONS = "questions.jsonl"  # questions given in memory to the API are kept here
EVAL_DIR = "eval"  # gradings eval/<name>.json, dynamics, alignment, and each evaluation's ledger-<name>.json
DYNAMICS = f"{EVAL_DIR}/dynamics.json"
ALIGNMENT = f"{EVAL_DIR}/alignment.json"
EVAL_LEDGER_PREFIX = "ledger-"
# Everything paid under eval/ (every evaluation, killed ones included), from eval/calls.jsonl: see
# rundir/requests.py. Each ledger-<name>.json is only the evaluation that wrote <name>.json.
EVAL_LEDGER = f"{EVAL_DIR}/ledger.json"
AUDITS_DIR = "audits"  # audits/outer_NNN/: one outer round's audit records (written whole) and verification
AUDIT_LOGS = ("structural_probe", "contrastive_probe", "frozen_pairs")
VERIFICATION = "verification.json"
INPUTS = "inputs.json"  # what the run was started from (the data's sha256); resume refuses a change
LOCK = ".lock"
PROVENANCE = "provenance.json"  # Provenance, below


# More tokens than any request has (replies are checked to 10^9): a count past it was not written by decoevo.
MAX_TOKENS_RECORDED = 10**12


# defer_build (these bases and rundir/events.py): a model's validator is built when first used, not at import.
# Most commands use a few of these records; building all of them cost every `decoevo` process about 0.03 s of
# CPU at start (bench/client/startup.py).
class _Record(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)


class Checkpoint(_Record):
    """The loop state after the last completed step, the ledger at that moment, and how far the two
    logs had grown then (resume cuts the event log back to `events_offset`; calls after `calls_offset`
    were paid after the checkpoint and are added back into the ledger)."""

    state: dict[str, Any]
    ledger: dict[str, Any]
    events_offset: int = Field(ge=0)
    calls_offset: int | None = Field(None, ge=0)  # None in format-1 runs
    format_version: int = 1
    # whose state this is (the start event's method, seed and run id): a checkpoint copied from another run
    # is refused on resume, not continued; None in checkpoints written before they carried it
    method: str | None = None
    seed: int | None = None
    run_id: str | None = None


class Inputs(_Record):
    """`inputs.json`, written at start: the data the splits were made from. Runs made before it
    existed have none and still resume (without the data check)."""

    data_path: str
    data_sha256: str | None = None  # None: the data was not a readable file or folder at start


RunStatus = Literal["finished", "budget_stop", "stopped", "incomplete"]


class Summary(_Record):
    """`summary.json`, written when a run ends (finished, or stopped cleanly by its budget)."""

    method: str
    seed: int
    steps_done: int = 0
    solver_version: int = 0
    generator_version: int = 0
    solver_accepts: int = 0
    generator_accepts: int = 0
    outer_rounds: int = 0
    failed_steps: int = 0
    stopped: str | None = None
    final_solver: str | None = None  # "improved: ..." or "initial: ..." and why (what ships)
    usage: dict[str, Any] = Field(default_factory=dict)
    # criteria the accepted solver versions stopped meeting (analysis/criterion_drift.py); None in older runs
    criterion_drift: dict[str, Any] | None = None
    status: Literal["finished", "budget_stop"] | None = None  # None in format-1 runs: see `run_status`
    format_version: int = 1

    @property
    def run_status(self) -> Literal["finished", "budget_stop"]:
        if self.status is not None:
            return self.status
        return "budget_stop" if self.stopped else "finished"


class CallLine(_Record):
    """One line of `calls.jsonl`: an answered model request, paid or from the cache."""

    role: str
    model: str
    key: str
    cached: bool
    # A count outside 0..MAX_TOKENS_RECORDED is no line this code wrote: such a line is not a call (the
    # call log's readers skip it, as any garbage line) and never reaches a ledger.
    prompt_tokens: int = Field(0, ge=0, le=MAX_TOKENS_RECORDED)
    completion_tokens: int = Field(0, ge=0, le=MAX_TOKENS_RECORDED)
    truncated: bool = False  # the reply hit max_tokens
    reasoning_tokens: int = Field(0, ge=0, le=MAX_TOKENS_RECORDED)  # of completion_tokens, the model's reasoning
    phase: str | None = None  # what the run was doing: "start", "step 3", "outer 1" (transcripts group by it)
    request: str | None = None  # the write-ahead record (requests.jsonl) this paid call completes
    estimated: bool = False  # sent but never answered: its tokens are upper bounds (lm/journal.py)



# The evaluation records (RUN/eval/: EvalFile, CompareFile, DynamicsFile, AlignmentFile and their parts) live in
# rundir/evalrecords.py and load when first asked for from here: a run never writes them, and their eight
# classes cost every run's start about 6 ms of CPU (tests/test_startup.py)
_EVAL_RECORDS = ("EvalFile", "CompareSide", "CompareRow", "CompareFile", "DynamicsPoint", "DynamicsFile",
                 "AlignmentFile")
if TYPE_CHECKING:  # the names as re-exported (`X as X`)
    from .evalrecords import AlignmentFile as AlignmentFile
    from .evalrecords import CompareFile as CompareFile
    from .evalrecords import CompareRow as CompareRow
    from .evalrecords import CompareSide as CompareSide
    from .evalrecords import DynamicsFile as DynamicsFile
    from .evalrecords import DynamicsPoint as DynamicsPoint
    from .evalrecords import EvalFile as EvalFile


def __getattr__(name: str) -> Any:
    if name in _EVAL_RECORDS:
        from . import evalrecords

        return getattr(evalrecords, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# ---- provenance.json: what produced a run, written once when a new run starts (decoevo.engine.provenance
# gathers it). Every field a reader needs has a default, so runs made before the file existed, or by a
# newer version with more fields, still read.

class _ProvenanceRecord(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True, defer_build=True)


class FileDigest(_ProvenanceRecord):
    """A file the run read (questions, task_spec): its sha256 when it could be read, else why not."""

    role: str  # "data" or "task_spec"
    path: str
    size: int | None = None
    sha256: str | None = None
    error: str | None = None


class ModelIdentity(_ProvenanceRecord):
    """One configured model and what the backend says it is. `served` is the server's `/models` entry
    for the model (an OpenAI-compatible server), `gguf_sha256` the weights' digest (the embedded
    backend); either stays None with `error` saying why when it could not be found out."""

    name: str  # the key in lm.models
    roles: list[str] = Field(default_factory=list)  # roles mapped to it explicitly (others use 'default')
    backend: str
    model: str
    base_url: str | None = None
    served: dict[str, Any] | None = None
    served_ids: list[str] = Field(default_factory=list)  # what the server lists (the first few)
    gguf_path: str | None = None
    gguf_size: int | None = None
    gguf_sha256: str | None = None
    error: str | None = None


class GitInfo(_ProvenanceRecord):
    """The checkout decoevo was imported from (absent for an installed package)."""

    commit: str
    dirty: bool | None = None


class Provenance(_ProvenanceRecord):
    decoevo: str
    python: str
    platform: str
    packages: dict[str, str | None] = Field(default_factory=dict)  # None: not installed
    files: list[FileDigest] = Field(default_factory=list)
    models: list[ModelIdentity] = Field(default_factory=list)
    git: GitInfo | None = None
    created: float | None = None
