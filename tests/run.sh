#!/usr/bin/env bash
# Set up a virtual environment and run the whole test suite: lint (ruff) and type checks (mypy),
# then unit, CPU backend, NVRTC compile checks, magics, widgets, browser, notebooks through nbval
# (GPU tests skip without a GPU).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -e ".[cuda13,test]"
.venv/bin/python -m ruff check jiter_magic tests
.venv/bin/python -m mypy
# The "compiling ..." line a slow build adds to a notebook cell would differ from run to run.
export JITER_MAGIC_NOTICE_AFTER=off
exec .venv/bin/python -m pytest -q -p no:cacheprovider tests notebooks --nbval --nbval-current-env \
  --nbval-sanitize-with notebooks/nbval_sanitize.cfg "$@"
