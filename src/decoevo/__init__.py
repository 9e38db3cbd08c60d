"""decoevo: score-decoupled co-evolution of solver and rubric-generator skills."""

import os

# The embedded model's llama.cpp threads come from OpenMP, whose default is to spin while waiting.
# When anything else wants the cores (a second run, a sweep cell, the judge's server), spinning threads
# steal them and each call slows 3-15x (bench/client/omp_wait.py). Passive waiting costs little when the
# machine is idle. Set here, before llama_cpp (and with it libgomp) can be loaded; a user's own
# OMP_WAIT_POLICY wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"

# The library API (decoevo.api), loaded on first use: `import decoevo` stays cheap for the CLI's
# subcommands and for worker processes.
_API = {"optimize", "optimize_async", "resume", "resume_async", "evaluate", "evaluate_async", "compare",
        "compare_async", "dynamics",
        "dynamics_async", "align", "align_async", "run_config", "RunResult", "RunCallback"}
_TYPES = {"ModelSpec": "lm", "LMConfig": "lm", "GenParams": "lm", "Question": "domain", "Skill": "domain",
          "RunReader": "rundir", "RunEvent": "rundir"}

__all__ = sorted(_API | set(_TYPES) | {"__version__"})


def __getattr__(name: str) -> object:
    import importlib

    if name in _API:
        return getattr(importlib.import_module(".api", __name__), name)
    if name in _TYPES:
        return getattr(importlib.import_module(f".{_TYPES[name]}", __name__), name)
    raise AttributeError(f"module 'decoevo' has no attribute {name!r}")
