"""The cost table (decoevo.analysis.costs) over small run directories written in the ledger's own format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from decoevo.analysis.costs import RunUsage, RunUsageError, Usage, cost_table, load_run_usage, load_runs
from decoevo.lm.ledger import UsageLedger

# (role, model) -> (calls, cache_hits, prompt_tokens, completion_tokens)
Rows = dict[tuple[str, str], tuple[int, int, int, int]]


def make_run(root: Path, name: str, method: str, seed: int, rows: Rows, *, summary: bool = True,
             config: bool = True, inherited: dict[tuple[str, str], tuple[int, int]] | None = None) -> Path:
    ledger = UsageLedger()
    for (role, model), (calls, hits, pt, ct) in rows.items():
        r = ledger.row(role, model)
        r.calls, r.cache_hits, r.prompt_tokens, r.completion_tokens = calls, hits, pt, ct
        r.inherited_calls, r.inherited_tokens = (inherited or {}).get((role, model), (0, 0))
    d = root / name
    d.mkdir(parents=True)
    (d / "ledger.json").write_text(ledger.to_json(), encoding="utf-8")
    if config:
        (d / "config.yaml").write_text(yaml.safe_dump({"method": method, "seed": seed, "hyper": {"steps": 2}}))
    if summary:
        usage = ledger.to_dict()["total"]
        (d / "summary.json").write_text(json.dumps({"method": method, "seed": seed, "usage": usage}))
    return d


SKILLOPT_0: Rows = {("solve", "default"): (60, 5, 30_000, 10_000), ("judge", "default"): (40, 0, 20_000, 4_000)}
SKILLOPT_1: Rows = {("solve", "default"): (80, 0, 40_000, 12_000), ("judge", "default"): (20, 0, 10_000, 2_000)}
DECOEVO_0: Rows = {("solve", "default"): (90, 0, 45_000, 15_000), ("judge", "default"): (60, 2, 30_000, 6_000),
                   ("structural_audit", "default"): (50, 0, 25_000, 5_000)}
DECOEVO_1: Rows = {("solve", "default"): (110, 0, 55_000, 17_000), ("judge", "default"): (40, 0, 20_000, 4_000)}


@pytest.fixture
def runs(tmp_path) -> list[RunUsage]:
    return load_runs([make_run(tmp_path, "so0", "skillopt", 0, SKILLOPT_0),
                      make_run(tmp_path, "so1", "skillopt", 1, SKILLOPT_1),
                      make_run(tmp_path, "de0", "decoevo", 0, DECOEVO_0),
                      make_run(tmp_path, "de1", "decoevo", 1, DECOEVO_1)])


# ---- one run -----------------------------------------------------------------------------------


def test_load_run_usage_sums_models_per_role(tmp_path):
    d = make_run(tmp_path, "r", "decoevo", 3, {("judge", "big"): (2, 1, 100, 10), ("judge", "small"): (3, 0, 50, 5),
                                               ("solve", "big"): (4, 0, 400, 40)})
    u = load_run_usage(d)
    assert (u.method, u.seed, u.finished, u.run_dir) == ("decoevo", 3, True, d)
    assert u.models == ("big", "small")
    assert list(u.by_role) == ["judge", "solve"]
    assert u.by_role["judge"] == Usage(calls=5, cache_hits=1, prompt_tokens=150, completion_tokens=15)
    assert u.total == Usage(9, 1, 550, 55) and u.total.tokens == 605


def test_load_run_without_summary_is_unfinished(tmp_path):
    u = load_run_usage(make_run(tmp_path, "r", "skillopt", 1, SKILLOPT_0, summary=False))
    assert (u.method, u.seed, u.finished) == ("skillopt", 1, False)


def test_method_from_summary_alone(tmp_path):
    u = load_run_usage(make_run(tmp_path, "r", "sc_coevo", 2, SKILLOPT_0, config=False))
    assert (u.method, u.seed, u.finished) == ("sc_coevo", 2, True)


def test_missing_ledger_names_the_file(tmp_path):
    d = make_run(tmp_path, "r", "skillopt", 0, SKILLOPT_0)
    (d / "ledger.json").unlink()
    with pytest.raises(RunUsageError, match=r"r/ledger\.json: missing"):
        load_run_usage(d)


@pytest.mark.parametrize(("text", "message"), [
    ('{"rows": [', r"ledger\.json: not valid JSON"),
    ('[1, 2]', r"ledger\.json: expected an object with a 'rows' list"),
    ('{"rows": [7]}', r"ledger\.json: rows\[0\] is not an object"),
    ('{"rows": [{"role": "solve", "calls": 1}]}', r"ledger\.json: rows\[0\]: needs string 'role' and 'model'"),
    ('{"rows": [{"role": "solve", "model": "m", "calls": -1, "cache_hits": 0, "prompt_tokens": 0, '
     '"completion_tokens": 0}]}', r"ledger\.json: rows\[0\]: 'calls' must be a non-negative integer"),
    ('{"rows": [{"role": "solve", "model": "m", "calls": 1, "cache_hits": 0, "prompt_tokens": "9", '
     '"completion_tokens": 0}]}', r"'prompt_tokens' must be a non-negative integer"),
    ('{"rows": [{"role": "solve", "model": "m", "calls": 1, "cache_hits": 0, "prompt_tokens": 9, '
     '"completion_tokens": 1, "tokens": 11}]}', r"'tokens' 11 != prompt \+ completion 10"),
])
def test_malformed_ledger_is_a_clear_error(tmp_path, text, message):
    d = make_run(tmp_path, "r", "skillopt", 0, SKILLOPT_0)
    (d / "ledger.json").write_text(text)
    with pytest.raises(RunUsageError, match=message):
        load_run_usage(d)


def test_duplicate_rows_and_wrong_total_are_errors(tmp_path):
    d = make_run(tmp_path, "r", "skillopt", 0, SKILLOPT_0)
    data = json.loads((d / "ledger.json").read_text())
    data["total"]["calls"] += 1
    (d / "ledger.json").write_text(json.dumps(data))
    with pytest.raises(RunUsageError, match=r"'total\.calls' 101 does not match the rows' sum 100"):
        load_run_usage(d)
    data = json.loads((d / "ledger.json").read_text())
    data["rows"].append(data["rows"][0])
    del data["total"]
    (d / "ledger.json").write_text(json.dumps(data))
    with pytest.raises(RunUsageError, match="duplicate row for role"):
        load_run_usage(d)


def test_identity_errors(tmp_path):
    d = make_run(tmp_path, "a", "decoevo", 0, SKILLOPT_0, summary=False, config=False)
    with pytest.raises(RunUsageError, match=r"neither summary\.json nor config\.yaml"):
        load_run_usage(d)
    d = make_run(tmp_path, "b", "decoevo", 0, SKILLOPT_0)
    (d / "config.yaml").write_text(yaml.safe_dump({"method": "skillopt", "seed": 0}))
    with pytest.raises(RunUsageError, match=r"summary\.json says method/seed .*decoevo.*config\.yaml says .*skillopt"):
        load_run_usage(d)
    (d / "summary.json").write_text("{}")
    with pytest.raises(RunUsageError, match=r"summary\.json: no 'method'"):
        load_run_usage(d)
    (d / "summary.json").write_text("{not json")
    with pytest.raises(RunUsageError, match=r"summary\.json: not valid JSON"):
        load_run_usage(d)
    with pytest.raises(RunUsageError, match="not a run directory"):
        load_run_usage(tmp_path / "nowhere")


# ---- the table ---------------------------------------------------------------------------------


def test_cost_table_means_and_ratios(runs):
    t = cost_table(runs)
    assert [m.method for m in t.methods] == ["skillopt", "decoevo"]  # the registry's order, baseline first
    so, de = t.method("skillopt"), t.method("decoevo")
    # SkillOpt totals: run 0 = 100 calls, 64k tokens; run 1 = 100 calls, 64k tokens → means 100, 64k
    assert (so.n_runs, so.seeds) == (2, (0, 1))
    assert so.total.calls == 100 and so.total.tokens == 64_000 and so.total.cache_hits == 2.5
    assert so.total.calls_ratio == 1.0 and so.total.tokens_ratio == 1.0
    # DecoEvo totals: run 0 = 200 calls, 126k; run 1 = 150 calls, 96k → means 175 calls, 111k tokens
    assert de.total.calls == 175 and de.total.tokens == 111_000
    assert de.total.prompt_tokens == 87_500 and de.total.completion_tokens == 23_500
    assert de.total.calls_ratio == pytest.approx(1.75) and de.total.tokens_ratio == pytest.approx(111 / 64)
    # a role used by one run only is averaged with 0 for the other
    audit = de.by_role["structural_audit"]
    assert audit.calls == 25 and audit.tokens == 15_000
    assert audit.calls_ratio == pytest.approx(0.25) and audit.tokens_ratio == pytest.approx(15 / 64)
    # role ratios are shares of the SkillOpt total, so they add up to the method's ratio
    assert sum(r.tokens_ratio or 0 for r in de.by_role.values()) == pytest.approx(de.total.tokens_ratio)
    assert sum(r.calls for r in de.by_role.values()) == pytest.approx(de.total.calls)
    assert "structural_audit" not in so.by_role


def test_without_skillopt_ratios_are_none(runs):
    t = cost_table([r for r in runs if r.method == "decoevo"])
    de = t.method("decoevo")
    assert de.total.calls == 175 and de.total.calls_ratio is None and de.total.tokens_ratio is None
    assert all(r.tokens_ratio is None for r in de.by_role.values())
    with pytest.raises(KeyError, match="skillopt"):
        t.method("skillopt")


def test_other_baseline_and_unknown_method_order(tmp_path, runs):
    extra = load_run_usage(make_run(tmp_path, "x", "my_variant", 0, DECOEVO_1))
    t = cost_table([*runs, extra], baseline="decoevo")
    assert [m.method for m in t.methods] == ["skillopt", "decoevo", "my_variant"]
    assert t.method("decoevo").total.tokens_ratio == 1.0
    assert t.method("skillopt").total.tokens_ratio == pytest.approx(64 / 111)


def test_unfinished_runs_refused_unless_allowed(tmp_path, runs):
    partial = load_run_usage(make_run(tmp_path, "p", "decoevo", 2, DECOEVO_1, summary=False))
    with pytest.raises(ValueError, match=r"unfinished runs .*p'\]"):
        cost_table([*runs, partial])
    assert cost_table([*runs, partial], allow_unfinished=True).method("decoevo").n_runs == 3


def test_same_method_and_seed_twice_refused(tmp_path, runs):
    again = load_run_usage(make_run(tmp_path, "so0_copy", "skillopt", 0, SKILLOPT_0))
    with pytest.raises(ValueError, match="skillopt seed 0 given twice"):
        cost_table([*runs, again])
    with pytest.raises(ValueError, match="no runs"):
        cost_table([])


def test_zero_cost_baseline_gives_no_ratio(tmp_path):
    zero = load_run_usage(make_run(tmp_path, "z", "skillopt", 0, {}))
    de = load_run_usage(make_run(tmp_path, "d", "decoevo", 0, DECOEVO_1))
    t = cost_table([zero, de])
    assert t.method("decoevo").total.calls_ratio is None and t.method("skillopt").total.calls == 0


def test_to_dict_is_json(runs):
    d = json.loads(json.dumps(cost_table(runs).to_dict()))
    assert d["baseline"] == "skillopt"
    de = d["methods"][1]
    assert de["method"] == "decoevo" and de["seeds"] == [0, 1]
    assert de["total"]["calls"] == 175 and de["total"]["calls_ratio"] == pytest.approx(1.75)
    assert de["by_role"]["structural_audit"]["tokens"] == 15_000


def test_to_markdown(runs):
    md = cost_table(runs).to_markdown()
    lines = md.splitlines()
    assert lines[0].startswith("Calls and tokens are effective")
    assert lines[2].startswith("| method | runs | calls | tokens (in+out) | paid in | paid out | inherited calls |")
    assert "| skillopt | 2 | 100 | 64.0k | 50.0k | 14.0k | 0 | 0 | 2.5 | 1.00× | 1.00× |" in lines
    assert "| decoevo | 2 | 175 | 111.0k | 87.5k | 23.5k | 0 | 0 | 1 | 1.75× | 1.73× |" in lines
    assert "| decoevo | structural_audit | 25 | 15.0k | 0 | 0 | 0.25× | 0.23× |" in lines
    no_base = cost_table([r for r in runs if r.method == "decoevo"]).to_markdown()
    assert "| – | – |" in no_base


# ---- effective usage: answers inherited from another run's cache entries count -------------------------


def test_inherited_usage_counts_as_cost(tmp_path):
    # SkillOpt paid for everything; DecoEvo ran later on the same cache and inherited 40 of its calls
    so = make_run(tmp_path, "so", "skillopt", 0, {("solve", "m"): (100, 0, 50_000, 10_000)})
    de = make_run(tmp_path, "de", "decoevo", 0, {("solve", "m"): (60, 45, 30_000, 6_000)},
                  inherited={("solve", "m"): (40, 24_000)})
    u = load_run_usage(de)
    assert u.total == Usage(60, 45, 30_000, 6_000, 40, 24_000)
    assert (u.total.effective_calls, u.total.effective_tokens) == (100, 60_000)
    row = cost_table(load_runs([so, de])).method("decoevo").total
    assert (row.calls, row.tokens) == (100, 60_000)  # what it would have cost alone
    assert (row.paid_calls, row.paid_tokens, row.inherited_calls, row.inherited_tokens) == (60, 36_000, 40, 24_000)
    assert row.cache_hits == 45  # 40 inherited + 5 of its own
    assert row.calls_ratio == 1.0 and row.tokens_ratio == 1.0  # a paid-only table would say 0.6×
    assert "| decoevo | 1 | 100 | 60.0k | 30.0k | 6.0k | 40 | 24.0k | 45 | 1.00× | 1.00× |" in \
        cost_table(load_runs([so, de])).to_markdown().splitlines()


def test_ledger_without_inherited_fields_reads_as_none_inherited(tmp_path):
    d = make_run(tmp_path, "old", "skillopt", 0, SKILLOPT_0)
    data = json.loads((d / "ledger.json").read_text())
    for row in [*data["rows"], data["total"]]:
        del row["inherited_calls"], row["inherited_tokens"]
    (d / "ledger.json").write_text(json.dumps(data))
    u = load_run_usage(d)
    assert u.total.inherited_calls == 0 and u.total.effective_calls == u.total.calls == 100


def test_inconsistent_inheritance_is_an_error(tmp_path):
    d = make_run(tmp_path, "r", "decoevo", 0, {("solve", "m"): (5, 2, 10, 10)}, inherited={("solve", "m"): (3, 9)})
    with pytest.raises(RunUsageError, match=r"rows\[0\]: 'inherited_calls' 3 exceeds 'cache_hits' 2"):
        load_run_usage(d)
    d = make_run(tmp_path, "t", "decoevo", 0, {("solve", "m"): (5, 2, 10, 10)}, inherited={("solve", "m"): (1, 9)})
    data = json.loads((d / "ledger.json").read_text())
    data["total"]["inherited_tokens"] = 0
    (d / "ledger.json").write_text(json.dumps(data))
    with pytest.raises(RunUsageError, match=r"'total\.inherited_tokens' 0 does not match the rows' sum 9"):
        load_run_usage(d)


async def test_shared_cache_cost_equals_cost_alone(tmp_path):
    """Engine runs sharing one cache, as in a sweep: the later run pays little, but its effective cost equals
    what the same run costs on a cache of its own, so the cost table does not depend on run order."""
    from decoevo.lm import RequestCache
    from tests.engine_helpers import toy_engine

    shared = RequestCache(tmp_path / "shared.sqlite")
    for method in ("decoevo", "skillopt"):  # DecoEvo first: SkillOpt's solver steps are then mostly cached
        engine, _ = toy_engine(tmp_path / "sweep", method, cache=shared)
        await engine.run_async()
    alone, _ = toy_engine(tmp_path / "alone", "skillopt")
    await alone.run_async()

    late, solo = load_run_usage(tmp_path / "sweep" / "skillopt"), load_run_usage(tmp_path / "alone" / "skillopt")
    assert late.total.calls < solo.total.calls and late.total.inherited_calls > 0  # it did inherit
    assert (late.total.effective_calls, late.total.effective_tokens) == (solo.total.calls, solo.total.tokens)
    in_sweep = cost_table([load_run_usage(tmp_path / "sweep" / "decoevo"), late]).method("skillopt").total
    assert (in_sweep.calls, in_sweep.tokens) == (solo.total.calls, solo.total.tokens)


async def test_real_engine_run_directories(tmp_path):
    """The loader reads what the engine itself writes (toy world, scripted backend)."""
    from tests.engine_helpers import toy_engine

    for method in ("skillopt", "decoevo"):
        engine, _ = toy_engine(tmp_path / method, method)
        await engine.run_async()
    runs = load_runs([tmp_path / m / m for m in ("skillopt", "decoevo")])
    assert [(r.method, r.seed, r.finished) for r in runs] == [("skillopt", 7, True), ("decoevo", 7, True)]
    t = cost_table(runs)
    assert t.method("skillopt").total.calls > 0
    de = t.method("decoevo")
    assert "structural_audit" in de.by_role and "structural_audit" not in t.method("skillopt").by_role
    assert de.total.tokens_ratio is not None and de.total.tokens_ratio > 1
