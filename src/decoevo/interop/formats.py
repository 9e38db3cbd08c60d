"""The `--format` names that are imports from another eval tool (read by interop/readers.py), apart from the
readers and their records: `decoevo run` checks a format against them on every run, and loads the rest only for
an import (tests/test_startup.py)."""

IMPORT_FORMATS = ("promptfoo", "inspect")
