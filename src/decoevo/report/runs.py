"""One run directory, read through `rundir.RunReader` into what the report shows about it.

Reading never raises for a damaged or partial run: each unreadable piece becomes a named problem (the
reader's message, naming the file and the line or field) and the rest of the run is still reported. Only
a directory that is no run at all (no config.yaml) is refused, by `discover`.
"""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

from ..analysis.costs import RunUsageError, load_run_usage
from ..analysis.discrimination import run_discrimination
from ..rundir import (
    BudgetStopEvent,
    InnerStepEvent,
    InnerStepFailedEvent,
    InvalidCandidateEvent,
    OuterRoundEvent,
    OuterRoundFailedEvent,
    ResumeEvent,
    RunEvent,
    RunReader,
    RunReadError,
    StartEvent,
    StoppedEvent,
    TranscriptEntry,
    parse_skill_markdown,
)
from ..rundir.evalfiles import cut_short, foreign, results_of, short_model_name
from ..rundir.progress import live_progress
from ..rundir.records import (
    ALIGNMENT,
    DYNAMICS,
    EVAL_DIR,
    PROVENANCE,
    SPLITS,
    AlignmentFile,
    CompareFile,
    DynamicsFile,
    EvalFile,
    Provenance,
)
from .gold import has_test_gold
from .run_record import (
    AuditRound,
    Candidate,
    Incident,
    InnerGate,
    ModelUse,
    OuterGate,
    RunRecord,
    SkillVersion,
    as_map,
)

T = TypeVar("T")
EMBEDDED_DEFAULT = "smollm2-135m-instruct-q4_1"  # ModelSpec's default label
TRANSCRIPTS_SHOWN = 40  # requests shown per phase of a run in a report of that run alone


# ---- pieces --------------------------------------------------------------------------------------

def _parse_skill_md(text: str) -> tuple[int | None, int | None, str, str]:
    """(version, parent, reason, body) of a skill file; (None, None, "", text) when it has no header."""
    try:
        skill = parse_skill_markdown(text)
    except ValueError:
        return None, None, "", text.strip()
    return skill.version, skill.parent, skill.reason.strip(), skill.text.strip()


def _read_text(reader: RunReader, rel: str, problems: list[str]) -> str | None:
    return _attempt(partial(reader.text, rel), problems, None)


def _lineage(reader: RunReader, kind: str, problems: list[str]) -> tuple[SkillVersion, ...]:
    out: list[SkillVersion] = []
    for rel in reader.files(f"skills/{kind}/v*.md"):
        text = _read_text(reader, rel, problems)
        if text is None:
            continue
        version, parent, reason, body = _parse_skill_md(text)
        if version is None:
            problems.append(f"{reader.path / rel}: no skill header; shown as plain text")
            digits = Path(rel).stem.lstrip("v")
            version = int(digits) if digits.isdigit() else len(out)
        diff_rel = rel.removesuffix(".md") + ".diff"
        diff = _read_text(reader, diff_rel, problems) if reader.has(diff_rel) else None
        out.append(SkillVersion(kind, version, parent, reason, body, diff))
    return tuple(sorted(out, key=lambda s: s.version))


def _candidates(reader: RunReader, lineages: Mapping[str, tuple[SkillVersion, ...]],
                problems: list[str]) -> tuple[Candidate, ...]:
    out = []
    for rel in reader.files("candidates/*.md"):
        text = _read_text(reader, rel, problems)
        if text is None:
            continue
        stem = Path(rel).stem
        kind, _, label = stem.partition("_")
        version, parent, reason, body = _parse_skill_md(text)
        diff = None
        parents = {s.version: s for s in lineages.get(kind, ())}
        if parent is not None and parent in parents:
            diff = "\n".join(difflib.unified_diff(parents[parent].text.splitlines(), body.splitlines(),
                                                  f"v{parent:03d}", f"candidate {label}", lineterm=""))
        out.append(Candidate(kind, label or stem, version, parent, reason, body, diff))
    return tuple(out)




def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _gates(events: list[RunEvent]) -> tuple[tuple[InnerGate, ...], tuple[OuterGate, ...], tuple[Incident, ...]]:
    inner, outer, incidents = [], [], []
    last_step: int | None = None
    for e in events:
        if isinstance(e, InnerStepEvent | InnerStepFailedEvent):
            last_step = e.step
        if isinstance(e, InnerStepEvent):
            inner.append(InnerGate(step=e.step, accepted=e.accepted, j_incumbent=e.J_incumbent,
                                   j_candidate=e.J_candidate, n=e.n, solver_version=e.solver_version, note=e.note,
                                   outcome=e.candidate_outcome))
        elif isinstance(e, OuterRoundEvent):
            outer.append(OuterGate(round=e.round, structural_records=e.structural_records,
                                   contrastive_records=e.contrastive_records, accepted=e.accepted,
                                   policy=e.policy, reason=e.reason, deltas=dict(e.deltas),
                                   generator_version=e.generator_version, after_step=last_step,
                                   outcome=e.candidate_outcome))
        elif isinstance(e, InnerStepFailedEvent | OuterRoundFailedEvent | StoppedEvent):
            where = (f"step {e.step}" if isinstance(e, InnerStepFailedEvent) else
                     f"round {e.round}" if isinstance(e, OuterRoundFailedEvent) else f"at_step {e.at_step}")
            incidents.append(Incident(e.event, where, e.category, e.role, e.error))
        elif isinstance(e, BudgetStopEvent):
            incidents.append(Incident(e.event, f"at_step {e.at_step}", None, None, e.reason))
        elif isinstance(e, ResumeEvent):
            incidents.append(Incident(e.event, f"next_step {e.next_step}", None, None, ""))
        elif isinstance(e, InvalidCandidateEvent):
            incidents.append(Incident(e.event, e.skill, e.problem, None, e.reason))
    return tuple(inner), tuple(outer), tuple(incidents)


def _audits(reader: RunReader, problems: list[str]) -> tuple[AuditRound, ...]:
    out: list[AuditRound] = []
    for rel in reader.audit_rounds():
        folder = _attempt(partial(reader.audit_round, rel), problems, None)
        if folder is None:
            continue
        records = {name: tuple(lines) for name, lines in folder.records.items()}
        out.append(AuditRound(folder.index if folder.index is not None else len(out), records["structural_probe"],
                              records["contrastive_probe"], records["frozen_pairs"],
                              folder.verification if isinstance(folder.verification, dict) else None))
    return tuple(out)


def _models(config: Mapping[str, Any]) -> tuple[tuple[ModelUse, ...], str]:
    """The models a run used and which model judged (the proxy scorer)."""
    lm = as_map(config.get("lm"))
    specs, roles = as_map(lm.get("models")), as_map(lm.get("roles"))
    if not specs:  # the engine's default: one embedded model
        specs = {"default": {"backend": "local", "model": EMBEDDED_DEFAULT}}
    uses = []
    for name, raw in specs.items():
        spec = as_map(raw)
        routed = tuple(sorted(r for r, m in roles.items() if m == name))
        backend = str(spec.get("backend", "local"))
        # an embedded model by its GGUF's stem (its `model` is only a label), a served path-named one too
        whole = spec.get("gguf_path") if backend == "local" and spec.get("gguf_path") else spec.get("model")
        uses.append(ModelUse(str(name), short_model_name(str(whole or EMBEDDED_DEFAULT)), backend,
                             ("default", *routed) if name == "default" else routed))
    by_name = {u.name: u.label for u in uses}
    judge = by_name.get(str(roles.get("judge", "default")), by_name.get("default", EMBEDDED_DEFAULT))
    return tuple(uses), judge


def _benchmark(config: Mapping[str, Any], hint: str | None, test: EvalFile | None, problems: list[str],
               path: Path) -> str:
    # A sweep's benchmark name is the user's label for a data file (e.g. 'hb_few'); the gold scheme it
    # is graded under ('healthbench') is another thing, so the two are not compared.
    if hint:
        return hint
    if test is not None:
        return test.benchmark
    data = as_map(config.get("data"))
    if data.get("format") and data["format"] != "jsonl":
        return str(data["format"])
    if data.get("task"):
        return str(data["task"])
    return Path(str(data.get("path") or "unknown")).stem.split(".")[0] or "unknown"


PARITY_STOP = "parity budget reached"  # a control that stopped where it was meant to: its paired run's usage


def _status(summary: Mapping[str, Any] | None, incidents: tuple[Incident, ...],
            path: Path, budget: Mapping[str, Any] | None = None) -> tuple[str, str | None]:
    if summary is not None:
        stopped = summary.get("stopped")
        stop = summary.get("status") == "budget_stop" or (summary.get("status") is None and stopped)
        if not stop:
            return "finished", None
        # matched to its paired run (budget.match_run), a control's token or call budget is its parity level:
        # reaching it is the run's planned end, not a stop of the kind `--max-cost` makes
        matched = bool((budget or {}).get("match_run"))
        if matched and str(stopped).startswith(("token budget reached", "call budget reached")):
            return PARITY_STOP, str(stopped)
        return "budget stop", str(stopped)
    crash = next((i for i in reversed(incidents) if i.event == "stopped"), None)
    if crash is not None:
        return "stopped (error)", f"{crash.category or 'error'} in {crash.role or 'a role'} at {crash.where}: " \
                                  f"{crash.message}"
    return "incomplete", f"no summary.json: the run is still going, or was killed (resume it with " \
                         f"`{shlex.join(['decoevo', 'resume', str(path)])}`)"


# ---- the run ---------------------------------------------------------------------------------------


def _identity(config: Mapping[str, Any], summary: Mapping[str, Any] | None, path: Path,
              problems: list[str]) -> tuple[str, int | None]:
    method, seed = config.get("method"), config.get("seed")
    if summary is not None:
        s_method, s_seed = summary.get("method"), summary.get("seed")
        if (s_method, s_seed) != (method, seed) and method is not None:
            problems.append(f"{path}: summary.json says {s_method}/seed {s_seed}, config.yaml says "
                            f"{method}/seed {seed}; using summary.json")
        method, seed = s_method or method, s_seed if s_seed is not None else seed
    if not isinstance(method, str) or not method:
        problems.append(f"{path}/config.yaml: no 'method'")
        method = "unknown"
    if seed is not None and _int(seed) is None:
        problems.append(f"{path}/config.yaml: 'seed' must be an integer, got {seed!r}")
        seed = None
    return method, seed


E = TypeVar("E", EvalFile, CompareFile)


def _eval_files(names: list[str], read: Callable[[str], E], reader: RunReader, method: str, seed: int | None,
                problems: list[str], run_id: str | None = None,
                split_ids: Mapping[str, list[str]] | None = None) -> dict[str, E]:
    """The gradings (or comparisons) under eval/ by file stem that are this run's own: a file of another
    method, seed or run (copied in) is left out, and one that covers less of its split than it should is
    shown with a warning."""
    out: dict[str, E] = {}
    for name in names:
        ev = _attempt(partial(read, name), problems, None)
        if ev is None:
            continue
        where = reader.path / EVAL_DIR / f"{name}.json"
        if (ev.method, ev.seed) != (method, seed):
            problems.append(f"{where}: evaluates {ev.method}/seed {ev.seed}, but "
                            f"the run is {method}/seed {seed}; left out")
            continue
        other = foreign(ev, run_id, split_ids)
        if other is not None:
            problems.append(f"{where}: {other}; left out (not this run's result)")
            continue
        short = cut_short(ev, split_ids)
        if short is not None:
            problems.append(f"{where}: {short}")
        # the report names a grader that is a file path by its file's stem; the file keeps the path
        out[name] = ev.model_copy(update={"grader_model": short_model_name(ev.grader_model)}) \
            if ev.grader_model else ev
    return out


def _independence(ev: EvalFile, models: tuple[ModelUse, ...]) -> EvalFile:
    """A record written before `self_graded` existed (the grader then defaulted to the run's own model):
    self-graded when the grader's model name is one that served an optimization role of the run."""
    if ev.self_graded is not None or not ev.grader_model:
        return ev
    optimizing = {u.label.lower() for u in models
                  if any(not (r.startswith("grader_") or r == "matcher") for r in u.roles)}
    graders = short_model_name(ev.grader_model).split(", ")
    return ev.model_copy(update={"self_graded": any(g.lower() in optimizing for g in graders)})


R = TypeVar("R", DynamicsFile, AlignmentFile)


def _own(read: Callable[[], R | None], rel: str, reader: RunReader, method: str, seed: int | None,
         problems: list[str]) -> R | None:
    """An optional record of the run (None when absent or unreadable), if it is this run's own."""
    data = _attempt(read, problems, None)
    if data is not None and (data.method, data.seed) != (method, seed):
        problems.append(f"{reader.path / rel}: belongs to {data.method}/seed {data.seed}, but the run is "
                        f"{method}/seed {seed}; left out")
        return None
    return data


def _checkpoint(reader: RunReader, problems: list[str]) -> tuple[int, int | None] | None:
    """(steps completed, solver version) of the checkpoint a resume would continue from."""
    point = _attempt(reader.checkpoint, problems, None)
    if point is None:
        return None
    solver = as_map(point.state.get("solver"))
    return _int(point.state.get("next_step")) or 0, _int(solver.get("version"))


def _attempt(read: Callable[[], T], problems: list[str], default: T) -> T:
    """`read()`, or `default` with the reader's message (which names the file) added to the problems."""
    try:
        return read()
    except RunReadError as e:
        problems.append(str(e))
        return default


def load_run(path: Path, *, name: str, anchor: str, sweep: Path | None = None,
             benchmark_hint: str | None = None, transcripts_shown: int = TRANSCRIPTS_SHOWN) -> RunRecord:
    problems: list[str] = []
    reader = RunReader(path)
    config: dict[str, Any] = _attempt(reader.config_dict, problems, {})
    summary_model = _attempt(reader.summary, problems, None)
    summary: dict[str, Any] | None = summary_model.model_dump(mode="json") if summary_model is not None else None
    if summary is None and reader.has("summary.json"):  # hand-edited or damaged: shown as it is
        raw_summary = _attempt(lambda: reader.json("summary.json"), [], None)
        summary = raw_summary if isinstance(raw_summary, dict) else None
    method, seed = _identity(config, summary, path, problems)
    events: list[RunEvent] = _attempt(lambda: reader.events(problems), problems, [])
    inner, outer, incidents = _gates(events)
    usage = None
    ledger_total = None
    live = live_progress(path) if summary is None else None
    try:
        if live is None:  # a running run writes ledger.json at its end: until then it has no usage to read
            usage = load_run_usage(path)
        total = (reader.ledger() or {}).get("total")
        ledger_total = total if isinstance(total, dict) else None
    except (RunUsageError, RunReadError) as e:
        problems.append(str(e))
    lineages = {kind: _lineage(reader, kind, problems) for kind in ("solver", "generator")}
    models, judge = _models(config)
    split_ids = _attempt(reader.split_ids, problems, None) if reader.has(SPLITS) else None
    run_id = next((e.run_id for e in events if isinstance(e, StartEvent)), None)
    evals = {k: _independence(ev, models)
             for k, ev in _eval_files(reader.eval_names(), reader.eval, reader, method, seed, problems, run_id,
                                      split_ids).items()}
    shipped = _int((summary or {}).get("solver_version"))
    shipped = shipped if shipped is not None else lineages["solver"][-1].version if lineages["solver"] else None
    budget = as_map(config.get("budget"))
    status, detail = ("running", live.describe()) if live is not None else _status(summary, incidents, path, budget)
    entries: list[TranscriptEntry] = _attempt(reader.transcripts, problems, [])
    checkpoint = _checkpoint(reader, problems) if summary is None and live is None else None
    splits = {k: tuple(v) for k, v in split_ids.items()} if split_ids is not None else None
    # read before the record is made: its problems are copied into it when it is made
    comparisons = _eval_files(reader.compare_names(), reader.comparison, reader, method, seed, problems, run_id,
                              split_ids)
    solver_model = next((u.label for u in models if "solve" in u.roles), None) or \
        next((u.label for u in models if u.name == "default"), EMBEDDED_DEFAULT)
    return RunRecord(
        path=path, name=name, anchor=anchor, method=method, seed=seed,
        benchmark=_benchmark(config, benchmark_hint, evals.get(results_of(evals, shipped).get("test", "")),
                             problems, path),
        backbone=solver_model, sweep=sweep, config=config, summary=summary, status=status, status_detail=detail,
        models=models, judge_model=judge, budget={k: v for k, v in budget.items() if v is not None},
        usage=usage, ledger_total=ledger_total, solver=lineages["solver"], generator=lineages["generator"],
        candidates=_candidates(reader, lineages, problems), inner_gates=inner, outer_gates=outer,
        incidents=incidents, audits=_audits(reader, problems), evals=evals,
        dynamics=_own(reader.dynamics, DYNAMICS, reader, method, seed, problems),
        alignment=_own(reader.alignment, ALIGNMENT, reader, method, seed, problems),
        **_by_phase(entries, transcripts_shown),
        provenance=_attempt(lambda: reader.model(Provenance, PROVENANCE), problems, None)
        if reader.has(PROVENANCE) else None,
        problems=tuple(problems), split_ids=splits, test_gold=has_test_gold(as_map(config.get("data")), splits),
        shipped_version=shipped,
        comparisons=comparisons,
        progress=live, checkpoint=checkpoint,
        discrimination=_attempt(partial(run_discrimination, path, entries), problems, None),
    )


def transcripts_shown(n_runs: int) -> int:
    """Requests the report shows per phase of a run: 40 for a report of one run, fewer the more runs it
    covers, at least 3. At 40 each, a sweep of 78 paper-scale runs was a 129 MB file (97 MB of it
    transcripts), which a browser opens slowly if at all; every request stays in the run's file."""
    return max(3, TRANSCRIPTS_SHOWN // max(1, n_runs))


def _by_phase(entries: list[TranscriptEntry], shown: int) -> dict[str, Any]:
    """The first `shown` entries of each phase and each phase's count: a run's transcripts are read one
    run at a time and only what the report shows is kept (a sweep's were gigabytes in memory)."""
    kept: dict[str, list[TranscriptEntry]] = {}
    counts: dict[str, int] = {}
    for e in entries:
        phase = e.phase or "unknown"
        counts[phase] = counts.get(phase, 0) + 1
        if counts[phase] <= shown:
            kept.setdefault(phase, []).append(e)
    return {"transcripts": {k: tuple(v) for k, v in kept.items()}, "transcript_counts": counts}
