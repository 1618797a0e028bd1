#!/usr/bin/env bash
# Builds the libFuzzer target tests/fuzz/fuzz_graph.c (reader, verifier, JSON round trip,
# planner, plan writers, reference interpreter) with clang, AddressSanitizer and
# UndefinedBehaviorSanitizer from the sources of lib/ir and lib/passes, replays the corpus
# (tests/fuzz/corpus: random graphs of every op and dtype; with the examples, the suite's graphs
# and tests/malformed), then fuzzes for a bounded time from a copy of it. Exits 0 when nothing
# was found, 1 on a finding (the crashing input is left in the work directory, named in the
# output), 77 when no clang with libFuzzer is found.
#
#   tools/fuzz.sh [WORKDIR]     default: build/fuzz
#
# ASTITCH_FUZZ_SECONDS: how long to fuzz after the replay (default 120; 0 replays only).
# ASTITCH_FUZZ_JOBS: parallel fuzzing processes (default 1).
# ASTITCH_FUZZ_CC: the compiler (default: the first of clang-19, clang that links libFuzzer).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="${1:-$root/build/fuzz}"
seconds="${ASTITCH_FUZZ_SECONDS:-120}"
jobs="${ASTITCH_FUZZ_JOBS:-1}"
mkdir -p "$work"

cc="${ASTITCH_FUZZ_CC:-}"
if [ -z "$cc" ]; then
  for c in clang-19 clang; do
    if command -v "$c" >/dev/null &&
       echo 'int LLVMFuzzerTestOneInput(const char *d, long n) { return 0; }' |
         "$c" -x c -fsanitize=fuzzer - -o "$work/probe" 2>/dev/null; then
      cc="$c"
      break
    fi
  done
fi
if [ -z "$cc" ]; then
  echo "fuzz: no clang with libFuzzer found (Debian: clang-19 libclang-rt-19-dev); skipped"
  exit 77
fi

echo "fuzz: building with $cc"
if ! "$cc" -std=c11 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
     -D_GNU_SOURCE -DASTITCH_BUILDING -DASTITCH_DEBUG_CHECKS=1 \
     -I"$root/include" -I"$root/lib" -I"$root/lib/ir" \
     "$root"/lib/ir/*.c "$root"/lib/passes/*.c "$root/tests/fuzz/fuzz_graph.c" \
     -ljansson -lm -o "$work/fuzz_graph"; then
  echo "fuzz: build failed"
  exit 1
fi

# Replay: every corpus input once, with the sanitizers.
if ! (cd "$work" && ./fuzz_graph -runs=0 "$root/tests/fuzz/corpus" "$root/examples" "$root/bench/graphs" "$root/tests/malformed"); then
  echo "fuzz: the corpus replay found a failure"
  exit 1
fi
[ "$seconds" -gt 0 ] || exit 0

# Fuzz from a copy of the corpus, so new inputs stay out of the tree.
rm -rf "$work/corpus"
mkdir -p "$work/corpus"
cp "$root"/tests/fuzz/corpus/* "$root"/examples/*.json "$root"/bench/graphs/*.json \
   "$root"/tests/malformed/* "$work/corpus/"
args=(-dict="$root/tests/fuzz/graph.dict" -max_len=65536 -rss_limit_mb=4096 -timeout=30
      -max_total_time="$seconds" -print_final_stats=1)
if [ "$jobs" -gt 1 ]; then
  args+=(-jobs="$jobs" -workers="$jobs")
fi
if ! (cd "$work" && ./fuzz_graph "${args[@]}" corpus); then
  echo "fuzz: a finding; its input is in $work (crash-*, leak-*, timeout-* or oom-*)"
  exit 1
fi
echo "fuzz: nothing found in ${seconds} s"
