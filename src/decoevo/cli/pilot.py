"""`decoevo pilot`: choose ε, τ_tie and K on the pilot split before any run (the work is `decoevo.pilot`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer

from .common import BaseUrlOption, BenchmarkOption, ConfigOption, ModelOption, console, guard
from .data import choose_data


def pilot_cmd(
    out_dir: Path = typer.Argument(..., help="Where pilot.json and the pilot's call log (pilot/) go."),
    config_file: Path = ConfigOption,
    data: str = typer.Option(None, help="Questions, as for `decoevo run`. Default: bundled sample."),
    fmt: str = typer.Option(None, "--format", help="The format of --data."),
    benchmark: str = BenchmarkOption,
    task: str = typer.Option(None, help="Task family for the structural audit spec."),
    model: str = ModelOption,
    base_url: str = BaseUrlOption,
    seeds: str = typer.Option(None, help="Comma-separated seeds; each seed's own pilot split (default: the "
                              "configuration's seed, else 0)."),
    preset: str = typer.Option(None, help="quick, default, paper, lean or paper-full (default: default against a "
                               "server, quick for the embedded model)"),
    set_: list[str] = typer.Option([], "--set", help="Override any config key, as the runs will: --set splits.pilot=4"),
) -> None:
    """Choose ε, τ_tie and K on the pilot split; a run takes them with --pilot.
    Keys hyper.epsilon, hyper.tau_tie, hyper.audit_every (`decoevo config hyper`); calls logged apart."""
    from .settings import RunFlags

    flags = RunFlags(config_file, None, data, fmt, benchmark, task, None, model, base_url, seeds, None, preset,
                     sets=tuple(set_))
    guard(_pilot, flags, out_dir)

def _pilot(flags: Any, out_dir: Path) -> None:
    from ..analysis.coevolve_advice import pilot_note
    from ..errors import ConfigError
    from ..lm.local import check_embedded
    from ..pilot import PILOT_FILE, run_pilot
    from .settings import preset_choice, run_configs

    link = out_dir / PILOT_FILE
    if link.is_symlink():  # found before any call: it is replaced at the end, never written through
        raise ConfigError(f"{link}: is a symbolic link (to {link.resolve()}); decoevo does not write through "
                          "links it did not make; replace it with the file, or name another directory")
    configs = run_configs(flags, choose_data)
    chosen = preset_choice(flags)
    if chosen.reason is not None:
        console.print(f"preset: {chosen.name} ({chosen.reason})", highlight=False)
    check_embedded(configs[0].lm.models)  # before the pilot's directory is made
    for config in configs:
        entry = run_pilot(config, out_dir)
        console.print(f"pilot seed {config.seed}: {entry.choice} -> {out_dir / 'pilot.json'}")
    # The pilot chooses hyperparameters, not the method: say what is measured about that choice, no more.
    console.print(pilot_note(), highlight=False, markup=False)
