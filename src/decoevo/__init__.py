"""decoevo: score-decoupled co-evolution of solver and rubric-generator skills."""

import os

# The embedded model's llama.cpp threads come from OpenMP, whose default is to spin while waiting.
# When anything else wants the cores (a second run, a sweep cell, the judge's server), spinning threads
# steal them and each call slows 3-15x (bench/omp_wait.py). Passive waiting costs little when the
# machine is idle. Set here, before llama_cpp (and with it libgomp) can be loaded; a user's own
# OMP_WAIT_POLICY wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
