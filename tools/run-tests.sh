#!/usr/bin/env bash
# Builds astitch and runs every test suite twice: in a plain build ("build") and in a build with
# AddressSanitizer and UndefinedBehaviorSanitizer ("build-san"), then the fuzz target
# (tools/fuzz.sh) for a bounded time. Exits non-zero when a build or
# a test fails; the last line says "N passed, N failed" over both runs.
#
# ASTITCH_BUILD_DIR overrides where the plain build goes (default: build in the source tree);
# the sanitizer build goes next to it with the suffix -san.
#
# The plain build also builds the Python package (python/astitch) for a virtual environment in
# <build>/venv, made here with PyTorch, NumPy and pytest from the package registry
# (python/requirements-test.txt), and runs the PyTorch bridge tests in it. ASTITCH_PYTHON_TESTS=0
# leaves the environment and those tests out (for machines without the registry); a failure to
# make the environment otherwise counts as a failed test.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ASTITCH_BUILD_DIR:-$root/build}"
jobs="$(nproc 2>/dev/null || echo 2)"

passed=0
failed=0
status=0

# setup DIR [meson options...]: configures DIR, or reconfigures it when it exists already.
setup() {
  local dir="$1"
  shift
  if [ -f "$dir/meson-private/coredata.dat" ]; then
    meson setup --reconfigure "$dir" "$root" "$@"
  else
    meson setup "$dir" "$root" "$@"
  fi
}

# Counts the results of the last `meson test` in DIR into passed/failed.
count() {
  local log="$1/meson-logs/testlog.json" p f
  if [ ! -f "$log" ]; then
    failed=$((failed + 1))
    return
  fi
  p=$(grep -c '"result": "OK"' "$log" || true)
  f=$(grep -cE '"result": "(FAIL|TIMEOUT|ERROR|UNEXPECTEDPASS)"' "$log" || true)
  passed=$((passed + p))
  failed=$((failed + f))
}

# run_suite NAME DIR [meson options...]
run_suite() {
  local name="$1" dir="$2"
  shift 2
  echo "=== $name: $dir"
  rm -f "$dir/meson-logs/testlog.json"
  if ! setup "$dir" "$@" || ! ninja -C "$dir" -j "$jobs"; then
    echo "=== $name: build failed"
    failed=$((failed + 1))
    status=1
    return
  fi
  if ! meson test -C "$dir" --print-errorlogs --num-processes "$jobs"; then
    status=1
  fi
  count "$dir"
}

# make_venv DIR: a virtual environment in DIR with the bridge tests' requirements.
make_venv() {
  local venv="$1"
  if [ ! -x "$venv/bin/python" ]; then
    python3 -m venv "$venv" || return 1
  fi
  "$venv/bin/python" -m pip install -q --disable-pip-version-check \
    -r "$root/python/requirements-test.txt"
}

bridge=(-Dbridge=disabled)
if [ "${ASTITCH_PYTHON_TESTS:-1}" != 0 ]; then
  echo "=== python: virtual environment $build/venv"
  if make_venv "$build/venv"; then
    bridge=(-Dbridge=enabled -Dpython="$build/venv/bin/python")
  else
    echo "=== python: the virtual environment could not be made (ASTITCH_PYTHON_TESTS=0 skips it)"
    failed=$((failed + 1))
    status=1
  fi
fi

run_suite plain "$build" "${bridge[@]}"

export ASAN_OPTIONS=detect_leaks=1
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1
# The plain run checks 500 random graphs on the host target; under the sanitizers each takes
# about ten times longer, so that run checks the first 100 of them.
export ASTITCH_DIFF_GRAPHS="${ASTITCH_DIFF_GRAPHS:-100}"
run_suite sanitizers "$build-san" -Db_sanitize=address,undefined -Db_lundef=false \
  -Dbridge=disabled

# The fuzz target (tests/fuzz): the corpus replayed, then ASTITCH_FUZZ_SECONDS (default 120) of
# fuzzing, under clang's sanitizers; skipped where no clang with libFuzzer is installed.
echo "=== fuzz: $build/fuzz"
unset ASAN_OPTIONS UBSAN_OPTIONS
"$root/tools/fuzz.sh" "$build/fuzz"
case $? in
  0) passed=$((passed + 1)) ;;
  77) ;;
  *) failed=$((failed + 1)) ;;
esac

if [ "$failed" -ne 0 ]; then
  status=1
fi
echo "$passed passed, $failed failed"
exit "$status"
