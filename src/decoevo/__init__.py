"""decoevo: score-decoupled co-evolution of solver and rubric-generator skills."""

__version__ = "0.1.0"
