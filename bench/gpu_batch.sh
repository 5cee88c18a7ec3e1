#!/usr/bin/env bash
# One device call of a session's GPU work, in steps that each fit a time cap, results under $OUT:
#   bash bench/gpu_batch.sh verify   GPU tests of every file (scans and OpInfo included), bench_scan.py,
#                                    then bench_reduce.py before/after (compare_gpu.sh, COMPARE_REDUCE)
#   bash bench/gpu_batch.sh speed    bench_gpu.py before/after, two interleaved rounds, with the cold rows
#   bash bench/gpu_batch.sh cpu      bench_cpu.py and bench_scan.py --device cpu at 2 threads and all cores
#   bash bench/gpu_batch.sh cpu-compare  bench_cpu.py at 2 threads, the baseline and this tree in turns
#                                    (base, new, then new, base: CPU_COMPARE_ROUNDS, default 2), then each row's jiter_magic time side by side;
#                                    its baseline is bench/.baseline-cpu-jiter_magic.tar (git archive REV jiter_magic)
# The baseline is bench/.baseline-jiter_magic.tar (compare_gpu.sh says how to make it).
set -u -o pipefail
[ -n "${OUT:-}" ] && trap 'bash "$(dirname "$0")/pack_out.sh" "$OUT"' EXIT  # the device's $OUT: 8 files come back (pack_out.sh)
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1 JITER_MAGIC_NOTICE_AFTER=off
python3 hatch_build.py > "$OUT/build.txt" 2>&1; tail -n 3 "$OUT/build.txt"
step() {  # NAME SECONDS COMMAND...: one step under a cap, its log in $OUT/NAME.log
  local name=$1 cap=$2 t0=$SECONDS; shift 2
  (JITER_MAGIC_CACHE_DIR=$(mktemp -d) PYTHONPATH=$PWD timeout -k 10 "$cap" "$@") > "$OUT/$name.log" 2>&1
  echo "$name rc=$? $((SECONDS - t0))s" | tee -a "$OUT/steps.txt"; tail -n 4 "$OUT/$name.log"
}
case ${1:-verify} in
  verify)
    step gpu-tests 330 python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_gpu_reductions.py \
      tests/gpu/test_gpu_scans.py tests/gpu/test_gpu.py tests/gpu/test_gpu_fast_call.py tests/gpu/test_gpu_trust.py \
      tests/scans/test_scans_opinfo.py --junitxml="$OUT/gpu-junit.xml"
    step bench-scan 110 python3 bench/bench_scan.py --device cuda --out "$OUT/scan"
    OUT=$OUT/reduce COMPARE_ELEMENTWISE=0 COMPARE_REDUCE=1 COMPARE_ROUNDS=1 COMPARE_TESTS=0 COMPARE_BUDGET_S=290 \
      bash bench/compare_gpu.sh > "$OUT/reduce-compare.log" 2>&1; tail -n 12 "$OUT/reduce-compare.log";;
  speed)
    OUT=$OUT/speed COMPARE_COLD=1 COMPARE_BENCH_S=200 COMPARE_TESTS=0 COMPARE_BUDGET_S=560 bash bench/compare_gpu.sh;;
  cpu)  # numexpr from carried wheels (.whl/: pip download --python-version 3.12 --only-binary=:all: --no-deps numexpr)
    python3 -c "import numexpr" 2>/dev/null || python3 -m pip install -q --no-index --find-links .whl numexpr 2>&1 | tail -n 2
    step cpu-2 190 taskset -c 0,1 python3 bench/bench_cpu.py --threads 2 --rounds 3 --out "$OUT/cpu-2-cores"
    step cpu-all 140 python3 bench/bench_cpu.py --threads all --rounds 3 --out "$OUT/cpu-all-cores"
    step scan-cpu-2 75 env OMP_NUM_THREADS=2 taskset -c 0,1 python3 bench/bench_scan.py --device cpu --out "$OUT/scan-cpu-2"
    step scan-cpu-all 65 python3 bench/bench_scan.py --device cpu --out "$OUT/scan-cpu-all";;
  cpu-compare)
    python3 -c "import numexpr" 2>/dev/null || python3 -m pip install -q --no-index --find-links .whl numexpr 2>&1 | tail -n 2
    base=$(mktemp -d)
    tar -xf bench/.baseline-cpu-jiter_magic.tar -C "$base" && mkdir -p "$base/bench" \
      && cp bench/bench_cpu.py bench/cpu_rows.py hatch_build.py "$base/bench/" && mv "$base/bench/hatch_build.py" "$base/" \
      && (cd "$base" && python3 hatch_build.py > "$OUT/base-build.txt" 2>&1); tail -n 2 "$OUT/base-build.txt"
    # Rounds alternate which tree goes first: on the H100 host the first run of a pair was the
    # faster one by up to 12% on the memory-bound rows, whichever tree it was (2026-12-07).
    order=(base new)
    for round in $(seq "${CPU_COMPARE_ROUNDS:-2}"); do
      (( round % 2 == 0 )) && order=(new base) || order=(base new)
      for side in "${order[@]}"; do
        root=$PWD; [ $side = base ] && root=$base
        (cd "$root" && step cpu-$side-$round 125 taskset -c 0,1 python3 bench/bench_cpu.py --threads 2 --rounds 2 \
          --out "$OUT/cpu-$side-$round")
      done
    done
    python3 - "$OUT" <<'PY'
import json, os, sys
out = sys.argv[1]
table = {}
for run in sorted(os.listdir(out)):
    path = os.path.join(out, run, "bench_cpu.json")
    if not os.path.exists(path):
        continue
    for row in json.load(open(path))["runs"][0]["rows"]:
        res = row["results"]
        ours = res.get("jiter_magic (NumPy arrays)") or res.get("jiter_magic (torch CPU tensors)")
        ind = res.get("Inductor")
        if ours:
            table.setdefault(row["row"], {})[run] = (ours["median"] * 1e3, ind["median"] / ours["median"] if ind else None)
for row, runs in table.items():
    print(row)
    for run, (ms, vs) in sorted(runs.items()):
        print(f"   {run:12s} {ms:8.2f} ms  vs Inductor {vs:.2f}x" if vs else f"   {run:12s} {ms:8.2f} ms")
PY
    ;;
esac
