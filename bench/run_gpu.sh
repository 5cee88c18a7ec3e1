#!/usr/bin/env bash
# One device call: GPU tests, then the benchmark. Results land in $OUT (or ./gpu-out).
# Usage on the GPU machine: bash bench/run_gpu.sh [tests|bench|notebooks|all]
# `notebooks` runs every notebook through nbval, strict and --nbval-lax; the GPU machine has no
# IPython or nbval, so it installs them from wheels carried in .whl/ (pip download, see README).
set -u -o pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD JITER_MAGIC_NOTICE_AFTER=off  # no "compiling ..." lines in notebook outputs
what=${1:-all}
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__); from cupy.cuda import nvrtc; print('nvrtc', nvrtc.getVersion())"
} 2>&1 | tee "$OUT/env.txt"
status=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 -m pytest tests/test_gpu.py -m gpu -q -p no:cacheprovider \
    --junitxml="$OUT/gpu-junit.xml" 2>&1 | tee "$OUT/gpu-tests.log" | tail -n 60
  status=${PIPESTATUS[0]}
fi
if [ "$what" = notebooks ] || [ "$what" = all ]; then
  if ! python3 -c "import nbval, ipykernel, ipywidgets, matplotlib" 2>/dev/null; then
    python3 -m pip install -q --no-index --find-links .whl nbval ipykernel ipywidgets matplotlib 2>&1 | tail -n 5
  fi
  for mode in strict lax; do
    flags=(--nbval-sanitize-with notebooks/nbval_sanitize.cfg)
    [ $mode = lax ] && flags=(--nbval-lax)
    JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 -m pytest -q -p no:cacheprovider notebooks --nbval --nbval-current-env \
      "${flags[@]}" 2>&1 | tee "$OUT/notebooks-$mode.log" | tail -n 40
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 bench/bench_gpu.py --out "$OUT" 2>&1 | tee "$OUT/bench.log" | tail -n 40
  # the PNG of GB/s against the ceilings (needs matplotlib: carried wheels, see `notebooks`)
  python3 bench/plot_results.py "$OUT/bench_gpu.json" 2>&1 | tail -n 2 || true
fi
exit $status
