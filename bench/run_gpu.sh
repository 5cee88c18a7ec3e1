#!/usr/bin/env bash
# One device call: GPU tests, then the benchmark. Results land in $OUT (or ./gpu-out).
# Usage on the GPU machine: bash bench/run_gpu.sh [tests|bench|reduce|notebooks|two-gpus|cpu|cold|all]
# BENCH_COLD=1 adds --cold to `bench` and `reduce`: a new process's start over an empty kernel cache
# and with the kernel on disk, beside the warm figures (bench/first_call_cold.py; about a minute
# each). `cold` (not part of `all`) runs only those rows of both, into $OUT/cold/.
# `tests` runs the GPU tests on the C call path, then test_gpu.py again on the Python one.
# `notebooks` runs every notebook through nbval, strict and --nbval-lax; the GPU machine has no
# IPython or nbval, so it installs them from wheels carried in .whl/ (pip download --python-version 3.12 --only-binary=:all: -d .whl ...).
# Pin dask and distributed to one release (e.g. "dask[array]==2026.8.0" "distributed==2026.8.0"): unpinned, pip's
# resolver for another platform fetched distributed 2021.4.1 beside dask 2026.11, which cannot import.
# `two-gpus` (on nvidia-h200-x2) runs the DTensor tests over two GPUs with NCCL, and executes
# notebook 05 whole, its two-GPU cells included, into $OUT/05_beyond.executed.ipynb.
# `cpu` (not part of `all`) runs bench/bench_cpu.py on the host's CPU: 2 threads on 2 cores
# (taskset -c 0,1), then every core (CPU_ROUNDS interleaved rounds, default 5), into $OUT/cpu-2-cores/ and $OUT/cpu-all-cores/; numexpr
# comes from the carried wheels (the machine's python3 has numba, no numexpr), and a contender
# still missing is left out of the tables with a note.
set -u -o pipefail
[ -n "${OUT:-}" ] && trap 'bash "$(dirname "$0")/pack_out.sh" "$OUT"' EXIT  # the device's $OUT: 8 files come back (pack_out.sh)
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD JITER_MAGIC_NOTICE_AFTER=off  # no "compiling ..." lines in notebook outputs
# NVLink multicast stays off on the shared multi-GPU hosts (KINDS.md of the device tool).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
carried() {  # install carried wheels (.whl/) that the GPU machine's python3 lacks
  python3 -c "import $1" 2>/dev/null || python3 -m pip install -q --no-index --find-links .whl "${@:2}" 2>&1 | tail -n 3
}
what=${1:-all}
COLD=()
[ "${BENCH_COLD:-0}" = 1 ] && COLD=(--cold)
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__); from cupy.cuda import nvrtc; print('nvrtc', nvrtc.getVersion())"
} 2>&1 | tee "$OUT/env.txt"
status=0
if [ "$what" = tests ] || [ "$what" = all ]; then
  carried "dask, distributed" "dask[array]" distributed  # tests/integrations/test_dask.py's CuPy chunks
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 -m pytest -m gpu -q -p no:cacheprovider tests/gpu/test_gpu.py \
    tests/gpu/test_gpu_fast_call.py tests/integrations/test_torch_compile.py tests/integrations/test_dask.py \
    tests/integrations/test_dtensor.py tests/gpu/test_gpu_trust.py tests/gpu/test_gpu_reductions.py \
    tests/runtime/test_reduce_opinfo.py \
    --junitxml="$OUT/gpu-junit.xml" 2>&1 | tee "$OUT/gpu-tests.log" | tail -n 60
  status=${PIPESTATUS[0]}
  # Numbers under torch.compile with this machine's torch (another version than CI's).
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 -m pytest -q -p no:cacheprovider \
    tests/integrations/test_torch_compile_values.py --junitxml="$OUT/compile-values-junit.xml" 2>&1 \
    | tee "$OUT/compile-values.log" | tail -n 15
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  # The same parity tests on the Python call path (the C one turned off), which runs wherever the C
  # call path cannot be built.
  JITER_MAGIC_FAST_CALL=0 JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 -m pytest -m gpu -q -p no:cacheprovider \
    tests/gpu/test_gpu.py --junitxml="$OUT/gpu-junit-python-path.xml" 2>&1 | tee "$OUT/gpu-tests-python-path.log" | tail -n 5
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [ "$what" = notebooks ] || [ "$what" = all ]; then
  carried "nbval, ipykernel, ipywidgets, matplotlib, dask, distributed" nbval ipykernel ipywidgets matplotlib \
    "dask[array]" distributed
  for mode in strict lax; do
    flags=(--nbval-sanitize-with notebooks/nbval_sanitize.cfg)
    [ $mode = lax ] && flags=(--nbval-lax)
    JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 -m pytest -q -p no:cacheprovider notebooks --nbval --nbval-current-env \
      "${flags[@]}" 2>&1 | tee "$OUT/notebooks-$mode.log" | tail -n 40
    [ "${PIPESTATUS[0]}" = 0 ] || status=1
  done
fi
if [ "$what" = two-gpus ]; then
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 -m pytest -m gpu -q -p no:cacheprovider tests/integrations/test_dtensor.py \
    --junitxml="$OUT/two-gpus-junit.xml" 2>&1 | tee "$OUT/two-gpus-tests.log" | tail -n 30
  status=${PIPESTATUS[0]}
  carried "nbclient, ipykernel, ipywidgets, matplotlib, dask, distributed" nbclient ipykernel ipywidgets \
    matplotlib "dask[array]" distributed
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) JITER_MAGIC_PANEL=static python3 - "$OUT" <<'PY' 2>&1 | tail -n 20
import sys, nbformat, nbclient
nb = nbformat.read("notebooks/05_beyond.ipynb", as_version=4)
nbclient.NotebookClient(nb, timeout=600, kernel_name="python3", allow_errors=True,
                        resources={"metadata": {"path": "notebooks"}}).execute()
nbformat.write(nb, f"{sys.argv[1]}/05_beyond.executed.ipynb")
print("executed notebook 05")
PY
fi
if [ "$what" = cpu ]; then
  carried "numexpr, numba" numexpr numba
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) taskset -c 0,1 python3 bench/bench_cpu.py --threads 2 --rounds "${CPU_ROUNDS:-5}" \
    --out "$OUT/cpu-2-cores" \
    2>&1 | tee "$OUT/bench-cpu-2-cores.log" | tail -n 70
  status=${PIPESTATUS[0]}
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 bench/bench_cpu.py --threads all --rounds "${CPU_ROUNDS:-5}" --out "$OUT/cpu-all-cores" 2>&1 \
    | tee "$OUT/bench-cpu-all-cores.log" | tail -n 70
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [ "$what" = reduce ] || [ "$what" = all ]; then
  # Issue 32's sum of squares of 4096 x 65536 on the GPU, then on the host's CPU at 2 threads (on 2
  # cores) and at every core; numexpr comes from the carried wheels.
  carried "numexpr" numexpr
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 bench/bench_reduce.py --device cuda ${COLD[@]+"${COLD[@]}"} --out "$OUT/reduce" 2>&1 \
    | tee "$OUT/bench-reduce.log" | tail -n 20
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) OMP_NUM_THREADS=2 taskset -c 0,1 python3 bench/bench_reduce.py --device cpu \
    --out "$OUT/reduce-cpu-2-cores" 2>&1 | tee "$OUT/bench-reduce-cpu-2.log" | tail -n 20
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 bench/bench_reduce.py --device cpu --out "$OUT/reduce-cpu-all-cores" 2>&1 \
    | tee "$OUT/bench-reduce-cpu-all.log" | tail -n 20
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  # Bytecode compiled ahead, as `pip install` does: a new process's first call is timed as a user
  # with the package installed sees it, not with every module compiled from source.
  python3 -m compileall -q jiter_magic > /dev/null
  JITER_MAGIC_CACHE_DIR=$(mktemp -d) python3 bench/bench_gpu.py ${COLD[@]+"${COLD[@]}"} --out "$OUT" 2>&1 | tee "$OUT/bench.log" \
    | tail -n 40
  # the PNG of GB/s against the ceilings (needs matplotlib: carried wheels, see `notebooks`)
  python3 bench/plot_results.py "$OUT/bench_gpu.json" 2>&1 | tail -n 2 || true
fi
if [ "$what" = cold ]; then
  # A new process's start, cold and warm from disk, for both kinds (bytecode compiled ahead, as
  # `pip install` does, so that a first import is not timed compiling modules).
  python3 -m compileall -q jiter_magic > /dev/null
  mkdir -p "$OUT/cold"
  python3 bench/bench_gpu.py --only cold --out "$OUT/cold" 2>&1 | tee "$OUT/cold/bench.log" | tail -n 12
  status=${PIPESTATUS[0]}
  python3 bench/bench_reduce.py --device cuda --only-cold --out "$OUT/cold" 2>&1 | tee "$OUT/cold/reduce.log" \
    | tail -n 12
  [ "${PIPESTATUS[0]}" = 0 ] || status=1
  for i in 1 2 3; do python3 -X importtime -c "import jiter_magic" 2> "$OUT/cold/importtime-$i.txt"; done
fi
exit $status
