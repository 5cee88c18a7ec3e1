#!/usr/bin/env bash
# Set up a virtual environment and run the whole test suite: lint (ruff), type checks (mypy), the
# import layers (import-linter), the documentation site (mkdocs build --strict), NVRTC 12 compile
# checks in a second venv with the cuda12 extra, then unit, CPU backend, NVRTC 13 compile checks,
# magics, widgets, browser, the documentation's doctests, notebooks through nbval (GPU tests skip
# without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
# The cuda12 extra in a venv of its own (CuPy's CUDA 12 and 13 wheels cannot share one): NVRTC 12
# compiles every generated kernel for sm_80 and sm_90 there (compile only, no GPU needed). First:
# an editable install builds the C call path's modules into the source tree, and this venv has no
# torch, so the main venv's install below must come last to leave its torch module there.
python3 -m venv .venv-cuda12
.venv-cuda12/bin/python -m pip install -q --upgrade pip
.venv-cuda12/bin/python -m pip install -q -e ".[cuda12]" "pytest>=7" "hypothesis>=6"
JITER_MAGIC_EXPECT_NVRTC=12 .venv-cuda12/bin/python -m pytest -q -p no:cacheprovider tests/kernels/test_codegen_nvrtc.py \
  tests/kernels/test_reduce_nvrtc.py
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
# After torch, in a command of its own: the install compiles the C call path's torch module against it (docs/install.md).
.venv/bin/python -m pip install -q -e ".[cuda13,test]"
.venv/bin/python -m ruff check jiter_magic tests
.venv/bin/python -m mypy
.venv/bin/lint-imports  # the layers of docs/architecture.md (pyproject.toml [tool.importlinter])
# The documentation site, warnings (a broken link or anchor, a docstring mkdocstrings cannot read) as
# errors; built into a temporary folder, never into the repository.
site_dir="$(mktemp -d)" && .venv/bin/python -m mkdocs build --strict --quiet --site-dir "$site_dir" && rm -rf "$site_dir"
# The "compiling ..." line a slow build adds to a notebook cell would differ from run to run.
export JITER_MAGIC_NOTICE_AFTER=off
exec .venv/bin/python -m pytest -q -p no:cacheprovider tests notebooks --nbval --nbval-current-env \
  --nbval-sanitize-with notebooks/nbval_sanitize.cfg "$@"
