#!/usr/bin/env bash
# Install what the tests need, lint and type-check, then run the default test suite (real-model tests included;
# tests marked `slow` are left out — run them with: .venv/bin/python -m pytest -m slow).
# tests/test_package.py builds the sdist and wheel, installs the wheel into a fresh virtualenv and runs
# a toy-world run from it, outside the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --dev
if [ "$#" -eq 0 ]; then  # the whole suite: lint and type-check first (about 25 s)
  .venv/bin/ruff check src tests bench scripts
  # mypy's incremental cache in the user's cache folder, shared by every checkout: a clean clone re-checks a
  # module only when its content differs from the cached one's (mypy compares hashes when paths and times
  # differ), instead of ~90 s of type-checking src/ and its dependencies from nothing
  MYPY_CACHE_DIR="${XDG_CACHE_HOME:-$HOME/.cache}/decoevo-dev/mypy" .venv/bin/mypy src/decoevo
fi
# install.sh --dev installed inspect-ai and, wherever npm is, promptfoo: the interop round trips must run, not skip
if command -v npm >/dev/null 2>&1; then export DECOEVO_REQUIRE_TOOLS=1; fi
# Two workers, each test file on one of them (module fixtures are built once): a serial run keeps one of
# the two cores busy on average, since most tests wait on a subprocess, a server or a model
# (docs/performance.md, "Test suite time").
exec .venv/bin/python -m pytest -n 2 --dist loadfile "$@"
