"""docs/configuration.md: its generated part is exactly what the configuration models render, so it
cannot drift; the reference covers every key, and its example and pointers are real."""

from __future__ import annotations

import importlib
import json
import pkgutil
import re
from pathlib import Path
from typing import Literal

import pytest
import yaml
from pydantic import BaseModel, Field
from typer.testing import CliRunner

import decoevo.cli as cli
import decoevo.cli.run as run_cmd
import decoevo.roles
from decoevo.engine import config_reference as ref
from decoevo.engine.config import RunConfig, config_from_dict
from decoevo.errors import ConfigError
from decoevo.evaluation.models import MATCHER_ROLE

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"


def test_the_committed_page_is_what_the_models_render() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert ref.with_reference(page) == page, f"docs/configuration.md is out of date; regenerate it: {ref.COMMAND}"


def leaf_keys(value: object, prefix: str = "") -> set[str]:
    if not isinstance(value, dict) or not value:
        return {prefix}
    return {k for name, v in value.items() for k in leaf_keys(v, f"{prefix}.{name}" if prefix else name)}


def test_every_key_of_a_run_configuration_has_a_row() -> None:
    dumped = RunConfig.model_validate({"data": {"path": "q.jsonl"}}).model_dump(mode="json")
    keys = {re.sub(r"^lm\.models\.default\.", "lm.models.NAME.", k) for k in leaf_keys(dumped)}
    rows = {r.key for s in ref.sections() for r in s.rows}
    assert keys <= rows and len(keys) > 60  # lm.models itself (a mapping of models) is a row too
    assert rows - keys == {"lm.models"}


def test_a_key_without_a_description_is_refused_by_name() -> None:
    class Section(BaseModel):
        described: int = Field(1, description="has one")
        bare: int = 2

    with pytest.raises(ValueError, match=r"x\.bare has no description; give Section\.bare a description="):
        ref.sections(Section, "x")


def test_rows_show_types_defaults_and_ranges() -> None:
    class Section(BaseModel):
        a: float = Field(0.8, gt=0, le=2, description="d")
        b: Literal["x", "y"] | None = Field(None, description="d")
        c: int = Field(..., gt=-(10**18), lt=10**18, description="d")

    rows = {r.key: r for r in ref.sections(Section)[0].rows}
    assert (rows["a"].type, rows["a"].default, rows["a"].allowed) == ("number", "`0.8`", "0 < x ≤ 2")
    assert (rows["b"].type, rows["b"].default, rows["b"].allowed) == ("string or null", "`null`", "`x`, `y`")
    assert (rows["c"].default, rows["c"].allowed) == ("required", "-10^18 < x < 10^18")


def test_every_preset_key_is_in_the_table_and_a_key_no_model_has_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    table = ref.render_reference().split("## Top level")[0]
    header, _, *lines = [line for line in table.splitlines() if line.startswith("|")]
    columns = [c.strip() for c in header.strip("|").split("|")]
    cells = {row[0]: dict(zip(columns, row, strict=True))
             for row in ([c.strip() for c in line.strip("|").split("|")] for line in lines)}
    for name, preset in ref.PRESETS.items():
        for section, values in preset.items():
            for key, value in values.items():
                shown = json.dumps(value) if isinstance(value, bool) else value  # the page writes YAML/JSON's true
                assert cells[f"`{section}.{key}`"][f"`{name}`"] == f"`{shown}`", (name, key)
    assert cells["`hyper.concurrency`"]["`quick`"] == "—" and cells["`hyper.concurrency`"]["no preset"] == "`8`"
    monkeypatch.setitem(ref.PRESETS, "broken", {"hyper": {"stepz": 3}})
    with pytest.raises(ValueError, match=r"hyper\.stepz"):
        ref.render_reference()


def test_every_role_is_listed() -> None:
    constants = set()
    for info in pkgutil.iter_modules(decoevo.roles.__path__):
        module = importlib.import_module(f"decoevo.roles.{info.name}")
        constants |= {v for k, v in vars(module).items() if k.endswith("ROLE") and isinstance(v, str)}
    assert constants and constants == set(ref.OPTIMIZATION_ROLES)
    assert ref.MATCHER_ROLE == MATCHER_ROLE
    page = PAGE.read_text(encoding="utf-8")
    assert all(f"`{role}`" in page for role in [*constants, MATCHER_ROLE, "grader_healthbench"])


def test_the_example_file_on_the_page_is_a_valid_configuration() -> None:
    block = re.search(r"```yaml\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S)
    assert block is not None
    config = config_from_dict(yaml.safe_load(block.group(1)), source="docs/configuration.md")
    assert config.lm.model_for("structural_audit") == "judge" and config.hyper.rollouts == 6


def test_an_unknown_key_points_at_the_command() -> None:
    """The wheel ships no docs: the message names the key meant and the command that lists the section."""
    expected = r"hyper\.stepz: unknown key; did you mean hyper\.steps\? \(`decoevo config hyper` lists its keys\)"
    with pytest.raises(ConfigError, match=expected):
        config_from_dict({"data": {"path": "q.jsonl"}, "hyper": {"stepz": 3}})


def test_the_page_names_no_internal_paths() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert "DESIGN.md" not in page and "../shared" not in page


def test_the_command_line_merges_in_the_order_the_page_gives(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RunConfig] = []
    monkeypatch.setattr(run_cmd, "_execute", lambda config, *args, **kwargs: seen.append(config))
    config = tmp_path / "run.yaml"
    config.write_text("seed: 7\nsplits: {train: 30}\nhyper: {steps: 5, rollouts: 3}\nlm: {models: {default: "
                      "{backend: openai, base_url: 'http://127.0.0.1:9/v1', model: file-model, max_retries: 1}}}\n")
    result = CliRunner().invoke(cli.app, [
        "run", "--preset", "paper", "--config", str(config), "--model", "flag-model", "--steps", "9",
        "--set", "hyper.steps=8", "--set", "hyper.steps=9", "--set", "seed=3", "--seeds", "3",
        "--set", "hyper={rollouts: 4}", "--runs-root", str(tmp_path / "runs")])
    assert result.exit_code == 0, result.output
    (run,) = seen
    assert run.splits.train == 30 and run.splits.test == 100  # the file over the preset, key by key
    assert run.hyper.rollouts == 4 and run.hyper.batch_size == 6  # a --set mapping merges with --steps
    assert run.hyper.steps == 9  # the last --set, agreeing with --steps, over the file
    assert run.seed == 3  # --seeds over the file
    default = run.lm.models["default"]  # --model changes the default model's name only
    assert (default.model, default.max_retries, default.base_url) == ("flag-model", 1, "http://127.0.0.1:9/v1")


def test_without_seeds_the_configuration_keeps_its_seed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RunConfig] = []
    monkeypatch.setattr(run_cmd, "_execute", lambda config, *args, **kwargs: seen.append(config))
    config = tmp_path / "run.yaml"
    config.write_text("seed: 7\nlm: {models: {default: {backend: openai, base_url: 'http://127.0.0.1:9/v1', "
                      "model: m}}}\n")
    base = ["run", "--config", str(config), "--runs-root", str(tmp_path / "runs")]
    for extra, seed in (([], 7), (["--set", "seed=5"], 5)):
        result = CliRunner().invoke(cli.app, [*base, *extra])
        assert result.exit_code == 0, result.output
        assert seen.pop().seed == seed  # it used to be 0 whatever the file or --set said


@pytest.mark.parametrize(("args", "says"), [
    (["--steps", "-1", "--set", "hyper.steps=4"], "--steps -1 and --set hyper.steps=4"),
    (["--steps", "3", "--set", "hyper=2"], "--steps 3 and --set hyper=2"),
    (["--max-cost", "1", "--set", "budget.max_cost=2"], "--max-cost 1.0 and --set budget.max_cost=2"),
    (["--seeds", "1", "--set", "seed=2"], "--seeds 1 and --set seed=2"),
    (["--base-url", "http://127.0.0.1:9/v1", "--set", "lm.models.default.base_url=http://h/v1"],
     "--base-url 'http://127.0.0.1:9/v1' and --set lm.models.default.base_url='http://h/v1'"),
    (["--no-cache", "--set", "lm.use_cache=true"], "--no-cache and --set lm.use_cache=True"),
    (["--benchmark", ""], "--benchmark is empty"),
    (["--data", " "], "--data is empty"),
    (["--method", ""], "--method is empty"),
])
def test_a_flag_and_a_set_of_one_key_must_agree_and_no_flag_is_empty(
        args: list[str], says: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[RunConfig] = []
    monkeypatch.setattr(run_cmd, "_execute", lambda config, *a, **k: seen.append(config))
    result = CliRunner().invoke(cli.app, ["run", *args, "--runs-root", str(tmp_path / "runs")])
    assert result.exit_code == 2 and says in " ".join(result.output.split()), result.output
    assert len(result.output.strip().splitlines()) <= 3 and "Traceback" not in result.output
    assert seen == []  # nothing ran (`--benchmark ""` used to run on the bundled sample)
