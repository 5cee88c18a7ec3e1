#!/usr/bin/env bash
# Rebuild the prebuilt JupyterLab extension (built/, committed and shipped in the wheel) from src/.
# Needs Node and npm (a user installing jiter_magic needs neither). Run from anywhere:
#   bash jiter_magic/labextension/build.sh
set -euo pipefail
cd "$(dirname "$0")"
# `jupyter labextension build` runs `jupyter-builder` from the PATH: the project's venv first.
export PATH="${VENV_BIN:-$(cd ../.. && pwd)/.venv/bin}:$PATH"
rm -rf lib built tsconfig.tsbuildinfo
npm ci --no-audit --no-fund
npx tsc
# Build against the installed JupyterLab's own core package.json (its shared singletons);
# without it the builder looks for a @jupyterlab/core-meta release that does not exist.
CORE="$(python -c 'import jupyterlab, os; print(os.path.join(os.path.dirname(jupyterlab.__file__), "staging", "package.json"))')"
jupyter labextension build --core-package-file "$CORE" .
# What the bundle was built from: tests/notebook/test_labextension.py checks it against src/ and package.json.
sha256sum src/index.ts src/cleanopen.ts package.json package-lock.json tsconfig.json > built/source.sha256
du -sh built/static
