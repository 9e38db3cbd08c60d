"""One configuration layer for every command: a preset, then a --config file, then the flags and the
--set items, into a validated run configuration (`run`, `pilot`), a sweep's overrides, a resume's
result-neutral changes, or the models `doctor` checks.

The flags and --set are one layer: a flag and a --set of the same key must agree (`--steps 3 --set
hyper.steps=5` is refused, naming both), and a --set mapping merges with the flags instead of replacing
them. An empty value for a flag (`--benchmark ""`) is refused, never read as "not given". Every problem is
a `ConfigError` naming the flag, key or file.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from ..engine.config import RunConfig, config_from_dict, deep_merge, lm_with_flags, unknown_key_hint
from ..engine.resume_config import NEUTRAL_IN_WORDS, leaves, result_neutral
from ..errors import ConfigError, validation_summary
from ..lm import LMConfig
from ..lm.providers import ServedModel, resolve_model_flag
from .endpoint import PresetChoice, choose_preset, default_is_served

ChooseData = Callable[[str | None, str | None, str | None], tuple[str | None, str | None]]


def apply_set(out: dict[str, Any], item: str) -> None:
    """One `--set KEY=VALUE` into `out`: a dotted key, a YAML value; a later --set wins, except that a
    key holding a plain value cannot also be given sub-keys (`--set a=3 --set a.b=1`)."""
    if "=" not in item:
        raise ConfigError(f"--set expects KEY=VALUE with a dotted key, e.g. hyper.epsilon=0.02; got '{item}'")
    key, text = item.split("=", 1)
    parts = key.strip().split(".")
    if not all(p.strip() for p in parts):
        raise ConfigError(f"--set '{item}': the key must be dotted names, e.g. hyper.epsilon; got '{key}'")
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise ConfigError(
            f"--set {key}: the value is not valid YAML ({problem}); quote it, e.g. --set '{key}=\"...\"'"
        ) from None
    except RecursionError:
        raise ConfigError(f"--set {key}: the value is nested too deeply") from None
    node = out
    for i, part in enumerate(parts[:-1]):
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(
                f"--set {key}: '{'.'.join(parts[: i + 1])}' was already given the value {child!r} "
                "(by another --set); give it either a value or sub-keys"
            )
        node = child
    node[parts[-1]] = value


def parse_sets(items: list[str] | tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        apply_set(out, item)
    return out


def refuse_empty(**flags: str | None) -> None:
    """A flag given an empty or blank value is a mistake (an unset variable in a script), not "unset"."""
    for name, value in flags.items():
        if value is not None and not str(value).strip():
            raise ConfigError(f"--{name.replace('_', '-')} is empty; give a value or leave the flag out")


def layer(flags: dict[str, Any], sets: dict[str, Any], flag_names: dict[str, str]) -> dict[str, Any]:
    """The flags' overrides and the --set items as one layer. A key both give must have one value:
    `flag_names` names each flag's key (hyper.steps: --steps) for the message."""
    given = leaves(sets)
    for key, value in leaves(flags).items():
        parts = key.split(".")
        for n in range(1, len(parts) + 1):
            prefix = ".".join(parts[:n])
            if prefix in given and (n < len(parts) or given[prefix] != value):
                shown = f"{given[prefix]!r}" if n == len(parts) else f"{given[prefix]!r} (not sub-keys)"
                flag = flag_names.get(key, key) + ("" if isinstance(value, bool) else f" {value!r}")
                raise ConfigError(
                    f"{flag} and --set {prefix}={shown} "
                    "give the same setting two values; give one"
                )
    return deep_merge(flags, sets)


FLAG_KEYS = {
    "method": "--method",
    "data.path": "--data",
    "data.format": "--format",
    "data.task": "--task",
    "data.task_spec": "--task-spec",
    "hyper.steps": "--steps",
    "hyper.concurrency": "--concurrency",
    "data.limit": "--limit",
    "budget.max_calls": "--max-calls",
    "budget.max_tokens": "--max-tokens",
    "budget.max_cost": "--max-cost",
    "lm.use_cache": "--no-cache",
}


def flag_overrides(
    *,
    method: str | None = None,
    data: str | None = None,
    fmt: str | None = None,
    task: str | None = None,
    task_spec: str | None = None,
    steps: int | None = None,
    max_calls: int | None = None,
    max_tokens: int | None = None,
    max_cost: float | None = None,
    limit: int | None = None,
    concurrency: int | None = None,
) -> dict[str, Any]:
    """The run flags as a nested override (flags left out are absent, not None)."""
    out: dict[str, Any] = {}
    for key, value in (
        ("method", method),
        ("data.path", data),
        ("data.format", fmt),
        ("data.task", task),
        ("data.task_spec", task_spec),
        ("hyper.steps", steps),
        ("hyper.concurrency", concurrency),
        ("data.limit", limit),
        ("budget.max_calls", max_calls),
        ("budget.max_tokens", max_tokens),
        ("budget.max_cost", max_cost),
    ):
        if value is not None:
            section, _, name = key.rpartition(".")
            (out.setdefault(section, {}) if section else out)[name] = value
    return out


def parse_seeds(seeds: str) -> list[int]:
    try:
        out = [int(s) for s in seeds.split(",") if s.strip()]
    except ValueError:
        raise ConfigError(f"--seeds expects comma-separated integers, e.g. 0,1,2; got '{seeds}'") from None
    if not out:
        raise ConfigError("--seeds is empty; give at least one seed, e.g. --seeds 0")
    if len(set(out)) != len(out):
        raise ConfigError(f"--seeds lists a seed twice: '{seeds}'")
    return out


_RUN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


def run_name(name: str) -> str:
    """A run directory's name: one path component inside --runs-root, never `..`, `/` or hidden."""
    if not _RUN_NAME.fullmatch(name) or ".." in name:
        raise ConfigError(
            f"--name '{name}': use letters, digits and . _ + - (one directory name inside --runs-root, not a path)"
        )
    return name


def check_new_run_dir(run_dir: Path) -> None:
    if (run_dir / "config.yaml").exists():
        raise ConfigError(f"{run_dir} already holds a run; continue it with `decoevo resume {run_dir}`, or pass --name")
    if run_dir.is_symlink():  # to a folder too: the run's files would land wherever it points
        raise ConfigError(f"{run_dir} is a symbolic link (to {run_dir.resolve()}); decoevo does not write a run "
                          "through a link: pass another --name, or name the folder it points to itself")
    if run_dir.exists() and not run_dir.is_dir():
        raise ConfigError(f"{run_dir} exists and is not a directory; pass another --name")
    # a pilot made for this run (`decoevo pilot RUN_DIR`) may already be there
    leftovers = (
        [p.name for p in run_dir.iterdir() if p.name not in (".lock", "pilot.json", "pilot")]
        if run_dir.is_dir()
        else []
    )
    if leftovers:
        raise ConfigError(
            f"{run_dir} exists and is not a run directory (it holds "
            f"{', '.join(sorted(leftovers)[:3])}); pass another --name or remove it"
        )


def absolute_paths(config: RunConfig) -> RunConfig:
    """Data and spec paths made absolute, so `decoevo eval` finds them from any directory later."""
    data = config.data
    update = {
        k: str(Path(v).resolve())
        for k, v in (("path", data.path), ("task_spec", data.task_spec))
        if v and Path(v).exists()
    }
    return config.model_copy(update={"data": data.model_copy(update=update)}) if update else config


def run_dir_for(config: RunConfig, runs_root: Path, name: str | None) -> Path:
    stem = Path(config.data.path).stem.split(".")[0]
    return runs_root / (name or re.sub(r"[^A-Za-z0-9._+-]", "_", f"{config.method}-{stem}-s{config.seed}"))


@dataclass(frozen=True)
class RunFlags:
    """What `decoevo run` and `decoevo pilot` were given (None: not given)."""

    config_file: Path | None = None
    method: str | None = None
    data: str | None = None
    fmt: str | None = None
    benchmark: str | None = None
    task: str | None = None
    task_spec: str | None = None
    model: str | None = None
    base_url: str | None = None
    seeds: str | None = None
    steps: int | None = None
    preset: str | None = None  # None: chosen by the model (cli/endpoint.py)
    max_calls: int | None = None
    max_tokens: int | None = None
    max_cost: float | None = None
    no_cache: bool = False
    sets: tuple[str, ...] = field(default_factory=tuple)
    pilot: Path | None = None
    limit: int | None = None
    concurrency: int | None = None


def _default_choose_data(data: str | None, fmt: str | None, benchmark: str | None) -> tuple[str | None, str | None]:
    from ..benchmarks import datastore

    return datastore.choose_data(data, fmt, benchmark)


def preset_choice(flags: RunFlags) -> PresetChoice:
    """The preset `run_configs` starts from, and why (when the user did not name one)."""
    from ..userfiles import load_yaml_mapping

    lm = load_yaml_mapping(flags.config_file).get("lm") if flags.config_file is not None else None
    served = default_is_served(lm) or bool(flags.base_url) or served_flag(flags.model, None, lm) is not None
    return choose_preset(flags.preset, served)


def served_flag(model: str | None, base_url: str | None, lm: Any = None) -> ServedModel | None:
    """The served model --model/--base-url name, when the configuration's default is not already served
    (then --model is a name at its server)."""
    if default_is_served(lm) and not base_url:
        return None
    return resolve_model_flag(model, base_url)


def with_model_flags(lm: Any, model: str | None, base_url: str | None, no_cache: bool) -> Any:
    """`lm` with --model/--base-url/--no-cache merged in; `--model PROVIDER/NAME` as its server and key."""
    served = served_flag(model, base_url, lm)
    if served is None:
        return lm_with_flags(lm, model, base_url, no_cache)
    out = lm_with_flags(lm, served.model, served.base_url, no_cache)
    if served.api_key_env is not None and isinstance(out, dict):
        out["models"]["default"]["api_key_env"] = served.api_key_env
    return out


def run_configs(flags: RunFlags, choose_data: ChooseData = _default_choose_data) -> list[RunConfig]:
    """One validated configuration per seed (each is valid before the first run starts)."""
    from ..presets import PRESETS, bundled_healthbench
    from ..userfiles import load_yaml_mapping

    refuse_empty(
        method=flags.method,
        data=flags.data,
        format=flags.fmt,
        benchmark=flags.benchmark,
        task=flags.task,
        task_spec=flags.task_spec,
        model=flags.model,
        base_url=flags.base_url,
        preset=flags.preset,
    )
    if flags.preset is not None and flags.preset not in PRESETS:
        raise ConfigError(f"unknown preset '{flags.preset}'; choose one of: {', '.join(PRESETS)}")
    preset = preset_choice(flags).name
    base: dict[str, Any] = deep_merge({}, PRESETS[preset])
    from_file: dict[str, Any] = {}
    if flags.config_file is not None:
        from_file = load_yaml_mapping(flags.config_file)
        base = deep_merge(base, from_file)
    data, fmt = flags.data, flags.fmt
    if "data" not in base or data or flags.benchmark:
        data, fmt = choose_data(data, fmt, flags.benchmark)
    if "data" not in base and not data:
        base["data"] = {"path": bundled_healthbench(), "format": "healthbench"}
    if flags.model or flags.base_url or flags.no_cache:  # they change the default model only (a file's role map stays)
        served = served_flag(flags.model, flags.base_url, base.get("lm"))
        base["lm"] = with_model_flags(base.get("lm"), flags.model, flags.base_url, flags.no_cache)
        if served is not None:
            flags = replace(flags, model=served.model, base_url=served.base_url)
    sets = parse_sets(flags.sets)
    _model_flags_agree(base.get("lm"), flags, sets)
    over = layer(
        flag_overrides(
            method=flags.method,
            data=data,
            fmt=fmt,
            task=flags.task,
            task_spec=flags.task_spec,
            steps=flags.steps,
            max_calls=flags.max_calls,
            max_tokens=flags.max_tokens,
            max_cost=flags.max_cost,
            limit=flags.limit,
            concurrency=flags.concurrency,
        ),
        sets,
        FLAG_KEYS,
    )
    source = (
        "the command-line flags"
        if flags.config_file is None
        else f"{flags.config_file} or the command-line flags"
        if over
        else str(flags.config_file)
    )
    if flags.seeds is not None:
        seed_list: list[Any] = parse_seeds(flags.seeds)
        if "seed" in sets and seed_list != [sets["seed"]]:
            raise ConfigError(
                f"--seeds {flags.seeds} and --set seed={sets['seed']!r} give the seed two values; give one"
            )
    else:  # the seed a file or --set gave (validated with the rest of the config)
        seed_list = [deep_merge(base, over).get("seed", 0)]
    configs = [
        absolute_paths(config_from_dict(deep_merge(base, {**over, "seed": seed}), source=source)) for seed in seed_list
    ]
    if flags.pilot is not None:  # what the user set explicitly keeps its value
        from ..pilot import with_pilot

        explicit = set(over.get("hyper", {})) | set(from_file.get("hyper", {}))
        configs = [with_pilot(c, flags.pilot, explicit) for c in configs]
    return configs


def _model_flags_agree(lm: Any, flags: RunFlags, sets: dict[str, Any]) -> None:
    """--model, --base-url and --no-cache against a --set of the keys they set."""
    models = lm.get("models") if isinstance(lm, dict) else None
    default = models.get("default") if isinstance(models, dict) else None
    served = isinstance(default, dict) and default.get("backend") == "openai"
    given: dict[str, Any] = {}
    if flags.base_url:
        given["base_url"] = flags.base_url
    if flags.model:
        given["model" if served or flags.base_url else "gguf_path"] = flags.model
    nested: dict[str, Any] = {"lm": {"models": {"default": given}}} if given else {}
    if flags.no_cache:
        nested.setdefault("lm", {})["use_cache"] = False
    names = {"lm.models.default.base_url": "--base-url", "lm.models.default.model": "--model",
             "lm.models.default.gguf_path": "--model", "lm.use_cache": "--no-cache"}
    layer(nested, sets, names)  # only the check: the flags are already in `lm`


def sweep_overrides(
    *,
    methods: str | None,
    seeds: str | None,
    preset: str | None,
    steps: int | None,
    max_calls: int | None,
    max_tokens: int | None,
    max_cost: float | None,
    evaluate: str | None,
    no_cache: bool,
    sets: list[str],
    pilot: Path | None,
) -> dict[str, Any]:
    """A sweep's flags and --set items as overrides of its spec."""
    refuse_empty(methods=methods, seeds=seeds, preset=preset, evaluate=evaluate)
    over = layer(
        flag_overrides(steps=steps, max_calls=max_calls, max_tokens=max_tokens, max_cost=max_cost),
        parse_sets(sets),
        FLAG_KEYS,
    )
    if pilot is not None:
        over["pilot"] = str(pilot.resolve())
    if methods:
        over["methods"] = [m.strip() for m in methods.split(",") if m.strip()]
    if seeds:
        over["seeds"] = parse_seeds(seeds)
    if preset:
        over["preset"] = preset
    if evaluate:
        over["evaluate"] = [] if evaluate.strip() == "none" else [s.strip() for s in evaluate.split(",") if s.strip()]
    if no_cache:
        over.setdefault("lm", {})["use_cache"] = False
    return over


def sweep_benchmark(
    data: str | None,
    fmt: str | None,
    task: str | None,
    benchmark: str | None,
    choose_data: ChooseData = _default_choose_data,
) -> dict[str, Any] | None:
    """A sweep's --data/--benchmark as its one benchmark (None: the spec's benchmarks)."""
    refuse_empty(data=data, format=fmt, task=task, benchmark=benchmark)
    if benchmark and not data:  # a fetched public benchmark
        data, fmt = choose_data(None, fmt, benchmark)
        benchmark = benchmark.replace(":", "-")
    elif data:
        data, fmt = choose_data(data, fmt, None)
    if data:
        stem = Path(data).stem.split(".")[0]
        return {
            "name": benchmark or stem,
            "data": str(Path(data).resolve()),
            "format": fmt or "jsonl",
            **({"task": task} if task else {}),
        }
    if fmt or task:
        raise ConfigError("--format and --task describe --data; pass --data too, or --benchmark NAME[:split] alone")
    return None


def neutral_overrides(config_file: Path | None, sets: list[str] | tuple[str, ...], command: str) -> dict[str, Any]:
    """`resume`'s --config and --set: only settings that cannot change a run's results (the one
    classification in engine/resume_config.py); any other key is refused, named."""
    from ..userfiles import load_yaml_mapping

    over = deep_merge(load_yaml_mapping(config_file) if config_file else {}, parse_sets(sets))
    for key in leaves(over):
        if not result_neutral(key):
            raise ConfigError(
                f"{command}: {key} would change the run's results; a resumed run may change only "
                f"{NEUTRAL_IN_WORDS} (start a new run for other settings)"
            )
    return over


def resume_config(run_dir: Path, config_file: Path | None = None, sets: list[str] | tuple[str, ...] = ()) -> RunConfig:
    """The run's config.yaml with `resume --config/--set` (result-neutral keys only) merged in."""
    from ..userfiles import load_yaml_mapping

    if not (run_dir / "config.yaml").is_file():
        raise ConfigError(f"{run_dir} is not a run directory (no config.yaml)")
    over = neutral_overrides(config_file, sets, "resume")
    source = str(run_dir / "config.yaml") + (" or the command-line flags" if over else "")
    return config_from_dict(load_yaml_mapping(run_dir / "config.yaml"), over, source=source)


def doctor_lm_config(
    *,
    config_file: Path | None,
    sets: list[str],
    model: str | None,
    base_url: str | None,
    no_cache: bool,
    settings: dict[str, Any],
) -> LMConfig:
    """The models `doctor` checks: a --config file's `lm` section, the model flags, then `--set lm.…`
    items and the doctor's own per-model settings (structured output, reasoning effort, key variable)."""
    from ..userfiles import load_yaml_mapping

    refuse_empty(model=model, base_url=base_url)
    lm = (load_yaml_mapping(config_file).get("lm") if config_file else None) or {}
    lm = with_model_flags(lm, model, base_url, no_cache) if (model or base_url or no_cache) else lm
    over = parse_sets(sets)
    others = [k for k in leaves(over) if not k.startswith("lm.")]
    if others:
        raise ConfigError(f"doctor: --set {others[0]}: doctor checks the models; give lm.* keys only")
    if settings:
        over = deep_merge(over, {"lm": {"models": {"default": settings}}})
    source = f"{config_file} or the command-line flags" if config_file else "the command-line flags"
    try:
        return LMConfig.model_validate(deep_merge({"lm": lm}, over)["lm"])
    except ValueError as exc:
        hint = validation_summary(exc, unknown_key=unknown_key_hint, prefix="lm.")
        raise ConfigError(f"{source}: {hint}") from None
