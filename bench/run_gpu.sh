#!/usr/bin/env bash
# One device call: GPU tests, then the benchmark. Results land in $OUT (or ./gpu-out).
# Usage on the GPU machine: bash bench/run_gpu.sh [tests|bench|all]
set -u -o pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD
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
if [ "$what" = bench ] || [ "$what" = all ]; then
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 bench/bench_gpu.py --out "$OUT" 2>&1 | tee "$OUT/bench.log" | tail -n 40
fi
exit $status
