#!/usr/bin/env bash
# Install what the tests need, then run the default test suite (real-model tests included;
# tests marked `slow` are left out — run them with: .venv/bin/python -m pytest -m slow).
# tests/test_package.py builds the sdist and wheel, installs the wheel into a fresh virtualenv and runs
# a toy-world run from it, outside the checkout.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh --dev
exec .venv/bin/python -m pytest "$@"
