#!/usr/bin/env bash
# One device call: an earlier version of the package (BASELINE_REV, default 2b01290, from bench/.baseline-jiter_magic.tar,
# made by `git archive REV jiter_magic > bench/.baseline-jiter_magic.tar`) against the current
# tree, on one GPU: bench/bench_gpu.py alternately (baseline-1, new-1, [baseline-2, new-2]),
# with COMPARE_REDUCE=1 bench/bench_reduce.py for both (reduce-baseline/, reduce-new/),
# bench/profile_host.py for both, the current tree's GPU tests, then bench/compare_results.py.
#
# Usage on the GPU machine, from the repository root: bash bench/compare_gpu.sh
# Results in $OUT (or ./gpu-out): env.txt, steps.txt, baseline-N/ and new-N/ (bench_gpu.json,
# bench_gpu.md, bench.log), profile-baseline.txt, profile-new.txt, gpu-tests.log, gpu-junit.xml,
# compare.md.
#
# Order: round 1 of the benchmark, the profiles, the tests, then round 2 only if the time left
# fits it (so the optional round can never crowd out the tests). Every step runs under `timeout`
# so the whole script ends within COMPARE_BUDGET_S seconds (default 540 = 9 minutes).
# Env: COMPARE_BUDGET_S (540), COMPARE_ROUNDS (2; 1 skips round 2), BASELINE_TAR (the tar above),
# COMPARE_BENCH_S (150: seconds one benchmark run may take), COMPARE_TESTS (1; 0 skips the tests),
# COMPARE_TEST_FILES (tests/gpu/test_gpu.py: the GPU test files to run), COMPARE_REDUCE (0),
# COMPARE_ELEMENTWISE (1; 0 skips bench_gpu.py, for a short call), COMPARE_COLD (0; 1 adds --cold to
# both benchmarks: a new process's start over an empty kernel cache and from disk, bench/first_call_cold.py,
# about a minute more a run: raise COMPARE_BENCH_S).
set -u -o pipefail
{ # the whole script is one compound command, read in full before it runs (safe to edit meanwhile)
START=$SECONDS
BUDGET=${COMPARE_BUDGET_S:-540}
ROUNDS=${COMPARE_ROUNDS:-2}
REPO=$PWD
[ -n "${OUT:-}" ] && trap 'bash "$(dirname "$0")/pack_out.sh" "$OUT"' EXIT  # the device's $OUT: 8 files come back (pack_out.sh)
OUT=${OUT:-$REPO/gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)  # absolute: the baseline runs from another folder
TAR=${BASELINE_TAR:-$REPO/bench/.baseline-jiter_magic.tar}
export PYTHONUNBUFFERED=1

left() { echo $(( BUDGET - (SECONDS - START) )); }
# cap WANT reserve RESERVE: seconds a step may take, keeping RESERVE for what must still run.
cap() { local l=$(( $(left) - $2 )); (( l > $1 )) && l=$1; echo $l; }
step_log() { printf '%-18s rc=%-4s %4ss  (at %ss of %ss)\n' "$1" "$2" "$3" "$((SECONDS - START))" "$BUDGET" \
  | tee -a "$OUT/steps.txt"; }
failed=0

if [ ! -f "$TAR" ]; then
  echo "missing $TAR: make it with 'git archive ${BASELINE_REV:-REV} jiter_magic > bench/.baseline-jiter_magic.tar'" \
       "and pass carry=[\"bench/.baseline-jiter_magic.tar\"] to the device call" >&2
  exit 2
fi
WORK=$(mktemp -d)
BASE=$WORK/baseline
mkdir -p "$BASE/bench"
tar -xf "$TAR" -C "$BASE" || { echo "could not extract $TAR" >&2; exit 2; }
# The same benchmark code for both trees: each script puts its own ../ first on sys.path, so a
# copy inside the baseline tree imports the baseline package. Runs start in their tree's root
# too, since bench_gpu.py's `python -c` subprocesses put the working folder first on sys.path.
cp bench/bench_gpu.py bench/bench_reduce.py bench/first_call_cold.py bench/profile_host.py "$BASE/bench/"
COLD=()
[ "${COMPARE_COLD:-0}" = 1 ] && COLD=(--cold)
# The baseline's own C call path, built as an install builds it (its sources, this tree's build
# script): without it the baseline would run the Python path and its host cost would not compare.
cp hatch_build.py "$BASE/" && (cd "$BASE" && python3 hatch_build.py) > "$WORK/baseline-build.txt" 2>&1 \
  || { echo "the baseline's C call path did not build:"; tail -n 5 "$WORK/baseline-build.txt"; }

: > "$OUT/steps.txt"
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  if head=$(git rev-parse --short HEAD 2>/dev/null); then
    echo "new tree: $head + $(git status --porcelain 2>/dev/null | wc -l) changed paths; baseline: ${BASELINE_REV:-2b01290} from $(basename "$TAR")"
  else
    echo "new tree: the working copy (no git metadata); baseline: ${BASELINE_REV:-2b01290} from $(basename "$TAR")"
  fi
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  python3 -c "import torch, cupy; print('torch', torch.__version__, 'cupy', cupy.__version__); from cupy.cuda import nvrtc; print('nvrtc', nvrtc.getVersion())"
} 2>&1 | tee "$OUT/env.txt"

# Which package each tree imports, resolved as its runs will resolve it.
which_pkg() { (cd "$1" && PYTHONPATH=$1 python3 -c "import os, jiter_magic; print(os.path.realpath(os.path.dirname(jiter_magic.__file__)))"); }
base_pkg=$(which_pkg "$BASE"); new_pkg=$(which_pkg "$REPO")
echo "baseline package: $base_pkg"$'\n'"new package:      $new_pkg" | tee -a "$OUT/env.txt"
if [ "$base_pkg" != "$(realpath "$BASE/jiter_magic")" ] || [ "$new_pkg" != "$(realpath "$REPO/jiter_magic")" ]; then
  echo "a tree fails to import jiter_magic, or imports another copy (an installed one?); stopping" >&2
  exit 2
fi

declare -A DUR=()
run_bench() {  # LABEL ROOT LIMIT
  local label=$1 root=$2 limit=$3 dir=$OUT/$1 t0=$SECONDS rc
  if (( limit < 30 )); then step_log "$label" skip 0; return; fi
  mkdir -p "$dir"
  (cd "$root" && JITER_MAGIC_CACHE_DIR=$(mktemp -d -p "$WORK") PYTHONPATH=$root \
     timeout -k 10 "$limit" python3 bench/bench_gpu.py --no-inductor ${COLD[@]+"${COLD[@]}"} --out "$dir") > "$dir/bench.log" 2>&1
  rc=$?
  DUR[$label]=$((SECONDS - t0))
  step_log "$label" "$rc" "${DUR[$label]}"
  if (( rc != 0 )); then failed=1; tail -n 20 "$dir/bench.log"; fi
}
run_reduce() {  # SIDE ROOT LIMIT: the reduction benchmark (4096 x 65536 sum of squares)
  local side=$1 root=$2 limit=$3 dir=$OUT/reduce-$1 t0=$SECONDS rc
  if (( limit < 30 )); then step_log "reduce-$side" skip 0; return; fi
  mkdir -p "$dir"
  (cd "$root" && JITER_MAGIC_CACHE_DIR=$(mktemp -d -p "$WORK") PYTHONPATH=$root \
     timeout -k 10 "$limit" python3 bench/bench_reduce.py --device cuda --rounds 3 ${COLD[@]+"${COLD[@]}"} --out "$dir") \
     > "$dir/bench.log" 2>&1
  rc=$?
  step_log "reduce-$side" "$rc" "$((SECONDS - t0))"
  if (( rc != 0 )); then failed=1; tail -n 20 "$dir/bench.log"; fi
}
run_profile() {  # SIDE ROOT LIMIT
  local side=$1 root=$2 limit=$3 t0=$SECONDS rc
  if (( limit < 15 )); then step_log "profile-$side" skip 0; return; fi
  (cd "$root" && JITER_MAGIC_CACHE_DIR=$(mktemp -d -p "$WORK") PYTHONPATH=$root \
     timeout -k 10 "$limit" python3 bench/profile_host.py) > "$OUT/profile-$side.txt" 2>&1
  rc=$?
  step_log "profile-$side" "$rc" "$((SECONDS - t0))"
  if (( rc != 0 )); then failed=1; tail -n 20 "$OUT/profile-$side.txt"; fi
}

# Round 1. Expected ~40-70 s a run on the H200; reserves keep room for the profiles, tests and table.
BENCH_S=${COMPARE_BENCH_S:-150}  # seconds one benchmark run may take
TESTS_S=${COMPARE_TESTS_S:-120}  # kept for the GPU tests (COMPARE_TESTS_S)
[ "${COMPARE_TESTS:-1}" = 0 ] && TESTS_S=0
if [ "${COMPARE_ELEMENTWISE:-1}" = 1 ]; then
  run_bench baseline-1 "$BASE" "$(cap "$BENCH_S" $(( BENCH_S + 100 + TESTS_S )))"
  run_bench new-1 "$REPO" "$(cap "$BENCH_S" $(( 100 + TESTS_S )))"
fi
if [ "${COMPARE_REDUCE:-0}" = 1 ]; then
  run_reduce baseline "$BASE" "$(cap 100 $(( 100 + 100 + TESTS_S )))"
  run_reduce new "$REPO" "$(cap 100 $(( 100 + TESTS_S )))"
fi
run_profile baseline "$BASE" "$(cap 60 $(( 50 + TESTS_S )))"
run_profile new "$REPO" "$(cap 60 $(( 5 + TESTS_S )))"

# The GPU tests of the current tree (80-100 s on the H200 before the restructure).
t0=$SECONDS
limit=$(cap 100000 15)
if [ "${COMPARE_TESTS:-1}" = 0 ]; then
  tests_rc=0
  echo "the GPU tests were not run (COMPARE_TESTS=0)" > "$OUT/gpu-tests.log"
elif (( limit >= 30 )); then
  (JITER_MAGIC_CACHE_DIR=$(mktemp -d -p "$WORK") PYTHONPATH=$REPO timeout -k 10 "$limit" \
     python3 -m pytest ${COMPARE_TEST_FILES:-tests/gpu/test_gpu.py} -m gpu -q -p no:cacheprovider \
       --junitxml="$OUT/gpu-junit.xml") \
     > "$OUT/gpu-tests.log" 2>&1
  tests_rc=$?
else
  tests_rc=124
  echo "no time left for the GPU tests" > "$OUT/gpu-tests.log"
fi
step_log gpu-tests "$tests_rc" "$((SECONDS - t0))"
tail -n 15 "$OUT/gpu-tests.log"

# Round 2, only if both runs fit with a margin (their round-1 times, plus a quarter).
if (( ROUNDS >= 2 )) && [ -n "${DUR[baseline-1]:-}" ] && [ -n "${DUR[new-1]:-}" ]; then
  need=$(( (${DUR[baseline-1]} + ${DUR[new-1]}) * 5 / 4 + 15 ))
  if (( $(left) >= need )); then
    run_bench baseline-2 "$BASE" "$(cap 300 $(( ${DUR[new-1]} * 9 / 8 + 15 )))"
    run_bench new-2 "$REPO" "$(cap 300 10)"
  else
    echo "round 2 skipped: $(left) s left, about $need s needed" | tee -a "$OUT/steps.txt"
  fi
fi

if [ "${COMPARE_ELEMENTWISE:-1}" = 1 ]; then python3 bench/compare_results.py "$OUT" > /dev/null || failed=1; fi
echo
cat "$OUT/steps.txt"
echo
cat "$OUT/compare.md" 2>/dev/null
rm -rf "$WORK"
if (( tests_rc != 0 )); then exit "$tests_rc"; fi
exit $failed
}
