#!/usr/bin/env bash
# Runs the benchmarks on a GPU machine from a build made elsewhere and carried along (this script
# builds nothing), writing every result under $OUT (or RESULTS_DIR) and printing the tables last.
#
#   bench/run_gpu.sh [STAGE]...      from the repository root; stages run in the order given
#
# Stages (default: info astitch compile peers):
#   info       driver, GPU, Python, torch and jax versions          -> env.txt
#   selfcheck  peers.py --self-check on the GPU: small graphs, every peer against astitch-run,
#              a few timed runs (the timing code path)               -> selfcheck.txt
#   astitch    astitch-bench on the full suite, the driver's JIT cache and astitch's disk
#              cache off (its compile column cold)                   -> astitch.{txt,json,csv}
#   compile    plan_bench: planning time of 1,000 and 10,000-node graphs -> plan_bench.txt
#   coldcompile  astitch-compile-time over the suite with the driver's JIT cache and astitch's
#              disk cache off (graph to loaded module, after its built-in warm-up), COMPILE_RUNS
#              times                                                 -> compile_time.txt
#   peers      peers.py beside astitch.json (this run's, or $ASTITCH_JSON from an earlier run)
#                                                                    -> peers.{txt,json,csv}
# Environment: ASTITCH_BUILD (build folder, default build-gpu), OUT or RESULTS_DIR (default
# bench-results), ASTITCH_COMMIT (recorded in the JSON), BENCH_ARGS and PEERS_ARGS (extra
# arguments, e.g. BENCH_ARGS=--filter=softmax PEERS_ARGS=--peers=eager,jax), SUITE_PART=K/N
# (the astitch and coldcompile stages take every N-th graph of the suite from the K-th, K from
# 1, so that one run can be split over jobs of limited length), COMPILE_RUNS (default 3).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ASTITCH_BUILD:-build-gpu}"
[ "${build#/}" != "$build" ] || build="$root/$build"
out="${RESULTS_DIR:-${OUT:-$root/bench-results}}"
mkdir -p "$out"
export ASTITCH_BENCH_DIR="$root/bench"
export ASTITCH_COMMIT="${ASTITCH_COMMIT:-$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)}"
export XLA_PYTHON_CLIENT_PREALLOCATE=false
bench="$build/bench/astitch-bench"
status=0

if [ ! -x "$bench" ]; then
  echo "run_gpu.sh: no $bench: build first (meson setup -Dllvm_static=true $build && ninja -C $build)" >&2
  exit 2
fi
if [ -d "$build/extra-libs" ]; then  # shared libraries the device image lacks, carried along
  export LD_LIBRARY_PATH="$build/extra-libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
missing="$(ldd "$bench" "$build/tools/astitch-run" 2>/dev/null | grep 'not found' | sort -u)"
if [ -n "$missing" ]; then
  echo "run_gpu.sh: libraries missing on this machine (put them in $build/extra-libs):" >&2
  echo "$missing" >&2
  exit 2
fi

stage_info() {
  {
    date -u +"date %Y-%m-%dT%H:%M:%SZ"
    echo "commit $ASTITCH_COMMIT"
    nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem \
      --format=csv 2>&1
    python3 -c 'import sys; print("python", sys.version.split()[0])'
    python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)' 2>&1 | tail -1
    python3 -c 'import jax; print("jax", jax.__version__, jax.devices())' 2>&1 | tail -1
  } | tee "$out/env.txt"
}

stage_selfcheck() {
  (cd "$root/bench" && python3 peers.py --self-check --device cuda --astitch-target cuda \
     --astitch-run "$build/tools/astitch-run" ${PEERS_ARGS:-}) 2>&1 | tee "$out/selfcheck.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
}

# The suite's graph files, or the part SUITE_PART names, one per line.
suite_graphs() {
  local part="${SUITE_PART:-1/1}" k n
  k="${part%/*}"; n="${part#*/}"
  if ! [[ "$k" =~ ^[0-9]+$ && "$n" =~ ^[0-9]+$ ]] || [ "$k" -lt 1 ] || [ "$k" -gt "$n" ]; then
    echo "run_gpu.sh: SUITE_PART='$part': expected K/N with 1 <= K <= N" >&2
    return 2
  fi
  "$bench" --suite=full --list | awk -v k="$k" -v n="$n" '(NR - k) % n == 0'
}

stage_astitch() {
  local graphs
  graphs="$(suite_graphs)" || exit 2
  # shellcheck disable=SC2086 # one graph file per word
  CUDA_CACHE_DISABLE=1 ASTITCH_CACHE_DIR=off \
    "$bench" --json="$out/astitch.json" --csv="$out/astitch.csv" ${BENCH_ARGS:-} $graphs \
    > "$out/astitch.txt" 2> "$out/astitch.log"
  local rc=$?
  [ "$rc" -eq 0 ] || { status=1; echo "astitch-bench exited with $rc (see astitch.log)"; }
  ASTITCH_JSON="$out/astitch.json"
}

stage_compile() {
  "$build/bench/plan_bench" 5 2>&1 | tee "$out/plan_bench.txt"
}

stage_coldcompile() {
  local graphs runs="${COMPILE_RUNS:-3}" r
  graphs="$(suite_graphs)" || exit 2
  : > "$out/compile_time.txt"
  for r in $(seq "$runs"); do
    echo "== run $r" >> "$out/compile_time.txt"
    # shellcheck disable=SC2086 # every graph (the warm-up is built in)
    CUDA_CACHE_DISABLE=1 ASTITCH_CACHE_DIR=off "$build/bench/astitch-compile-time" \
      $graphs >> "$out/compile_time.txt" 2>&1 ||
      { status=1; echo "astitch-compile-time failed (see compile_time.txt)"; }
    tail -1 "$out/compile_time.txt"
  done
}

stage_peers() {
  local json="${ASTITCH_JSON:-$out/astitch.json}" from=()
  [ -f "$json" ] && from=(--astitch-json "$json") || echo "peers: no astitch.json; peers only"
  (cd "$root/bench" && python3 peers.py "${from[@]}" --astitch-run "$build/tools/astitch-run" \
     --json "$out/peers.json" --csv "$out/peers.csv" ${PEERS_ARGS:-}) \
    > "$out/peers.txt" 2> "$out/peers.log"
  [ $? -eq 0 ] || { status=1; echo "peers.py failed or found a mismatch (see peers.log)"; }
}

stages=("$@")
[ ${#stages[@]} -gt 0 ] || stages=(info astitch compile peers)
for s in "${stages[@]}"; do
  echo "=== $s ($(date -u +%H:%M:%S))"
  case "$s" in
    info|selfcheck|astitch|compile|coldcompile|peers) "stage_$s" ;;
    *) echo "run_gpu.sh: unknown stage $s" >&2; exit 2 ;;
  esac
done
# The tables last (the end of the output is what a remote run shows): astitch's stitch rows,
# failures and summary (every mode is in astitch.txt), then the side-by-side table.
if [ -f "$out/astitch.txt" ]; then
  echo; echo "=== astitch.txt: mode stitch, failures, summary"
  awk 'NR <= 3 || $2 == "stitch" || /^    (WRONG|error)/ || /^cases:/ {p = p || /^cases:/}
       NR <= 3 || $2 == "stitch" || /^    (WRONG|error)/ || p' "$out/astitch.txt"
fi
[ -f "$out/peers.txt" ] && { echo; echo "=== peers.txt"; cat "$out/peers.txt"; }
exit $status
