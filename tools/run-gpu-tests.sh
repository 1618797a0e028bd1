#!/usr/bin/env bash
# Runs the gpu test suite from a build made elsewhere and carried along (for a GPU machine with
# no meson or LLVM; this script builds nothing). The same programs as `meson test --suite gpu`:
#   test_cuda                            the driver layer, device model, launches, workspace
#   test_dots cuda                       dots of random layouts and dtypes between kernels
#   test_exp_range cuda                  f32 exp over its range, denormal results kept
#   test_divide_shared cuda              divisions sharing a divisor, over the whole range
#   test_gpu_diff (ASTITCH_GPU_GRAPHS=0) every example under none/xla/stitch and forced parts form,
#                                        two streams, misaligned pointers, split combines
#   test_gpu_diff, N shards at once      the random graphs (ASTITCH_GPU_SHARD=K/N)
#   astitch-run --target=cuda --check    every example through the command-line tool
#   pytest tests/python on cuda          the PyTorch bridge's tests (ASTITCH_TEST_DEVICE=cuda;
#                                        CUDA-graph capture included), where the build made the
#                                        Python package and $PYTHON (default python3) imports
#                                        torch and pytest; a skip otherwise
# Logs go under $OUT (or RESULTS_DIR, default gpu-results); the last line says
# "gpu suite: N passed, N failed". Exits 1 when anything failed, 77 when no GPU is usable.
#
#   tools/run-gpu-tests.sh               from the repository root
# Environment: ASTITCH_BUILD (build folder, default build-gpu), ASTITCH_GPU_GRAPHS (random
# graphs, default 1000), GPU_SHARDS (shards of the random graphs, default the core count; each
# shard is one process, all running at once), GPU_SHARD_RANGE=A-B (run only shards A..B, so that
# the random graphs can be split over several runs), GPU_PARTS (a comma-separated subset of
# cuda,examples,random,cli,bridge; default all).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ASTITCH_BUILD:-build-gpu}"
[ "${build#/}" != "$build" ] || build="$root/$build"
out="${RESULTS_DIR:-${OUT:-$root/gpu-results}}"
graphs="${ASTITCH_GPU_GRAPHS:-1000}"
shards="${GPU_SHARDS:-$(nproc 2>/dev/null || echo 4)}"
range="${GPU_SHARD_RANGE:-0-$((shards - 1))}"
parts=",${GPU_PARTS:-cuda,examples,random,cli,bridge},"
first="${range%-*}"
last="${range#*-}"
if ! [[ "$first" =~ ^[0-9]+$ && "$last" =~ ^[0-9]+$ ]] || [ "$first" -gt "$last" ] ||
   [ "$last" -ge "$shards" ]; then
  echo "run-gpu-tests.sh: GPU_SHARD_RANGE='$range': expected A-B with 0 <= A <= B < $shards" >&2
  exit 2
fi
mkdir -p "$out"
export ASTITCH_SOURCE_ROOT="$root"
if [ -d "$build/extra-libs" ]; then  # shared libraries the machine lacks, carried along
  export LD_LIBRARY_PATH="$build/extra-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
for prog in tests/test_cuda tests/test_dots tests/test_exp_range tests/test_divide_shared \
            tests/test_gpu_diff tools/astitch-run; do
  if [ ! -x "$build/$prog" ]; then
    echo "run-gpu-tests.sh: no $build/$prog: build first (meson setup -Dllvm_static=true)" >&2
    exit 2
  fi
done

passed=0
failed=0
skipped=0
# record NAME STATUS: counts one program's exit status (77 is a skip).
record() {
  case "$2" in
    0) passed=$((passed + 1)); echo "PASS $1" ;;
    77) skipped=$((skipped + 1)); echo "SKIP $1" ;;
    *) failed=$((failed + 1)); echo "FAIL $1 (exit $2)" ;;
  esac
}

if [[ "$parts" == *,cuda,* ]]; then
  "$build/tests/test_cuda" >"$out/cuda.log" 2>&1
  status=$?
  record test_cuda $status
  [ "$status" -ne 77 ] || { tail -5 "$out/cuda.log"; echo "gpu suite: no usable GPU"; exit 77; }
  "$build/tests/test_dots" cuda >"$out/dots.log" 2>&1
  record "test_dots cuda" $?
  "$build/tests/test_exp_range" cuda >"$out/exp-range.log" 2>&1
  record "test_exp_range cuda" $?
  "$build/tests/test_divide_shared" cuda >"$out/divide-shared.log" 2>&1
  record "test_divide_shared cuda" $?
fi

if [[ "$parts" == *,examples,* ]]; then
  ASTITCH_GPU_GRAPHS=0 "$build/tests/test_gpu_diff" >"$out/gpu-diff.log" 2>&1
  record "test_gpu_diff (examples, streams, alignment, split combines)" $?
fi

if [[ "$parts" == *,random,* ]]; then
  start=$(date +%s)
  pids=()
  for ((k = first; k <= last; k++)); do
    ASTITCH_GPU_GRAPHS="$graphs" ASTITCH_GPU_SHARD="$k/$shards" \
      "$build/tests/test_gpu_diff" >"$out/gpu-shard-$k.log" 2>&1 &
    pids+=($!)
  done
  for ((k = first; k <= last; k++)); do
    wait "${pids[$((k - first))]}"
    record "test_gpu_diff shard $k/$shards" $?
  done
  echo "random graphs: shards $first-$last of $shards ($graphs graphs in all), $(($(date +%s) - start)) s;" \
    "$(grep -h '^random graphs on the GPU' "$out"/gpu-shard-*.log |
       awk '{g += $6; r += $8; f += $10} END {print g " graphs, " r " runs, " f " failures"}')"
fi

if [[ "$parts" == *,cli,* ]]; then
  : >"$out/cli.log"
  for example in "$root"/examples/*.json; do
    "$build/tools/astitch-run" --target=cuda --check "$example" >>"$out/cli.log" 2>&1
    status=$?
    record "astitch-run --target=cuda --check ${example##*/}" $status
  done
fi

if [[ "$parts" == *,bridge,* ]]; then
  python="${PYTHON:-python3}"
  if [ -d "$build/python/astitch" ] && "$python" -c 'import torch, pytest' 2>/dev/null; then
    ASTITCH_TEST_DEVICE=cuda PYTHONPATH="$build/python" "$python" -m pytest -q \
      -p no:cacheprovider "$root/tests/python" >"$out/bridge.log" 2>&1
    record "pytest tests/python (cuda)" $?
    tail -1 "$out/bridge.log"
  else
    record "pytest tests/python (cuda): no Python package in $build or no torch and pytest" 77
  fi
fi

grep -h -B2 -A8 -E 'FAILED|ERROR|mismatch' "$out"/*.log | head -60
echo "gpu suite: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
