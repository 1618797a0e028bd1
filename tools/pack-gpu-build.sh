#!/usr/bin/env bash
# Packs what the GPU scripts (tools/run-gpu-tests.sh, bench/run_gpu.sh) need from a build made
# with -Dllvm_static=true into one archive, for a GPU machine without LLVM 19 or meson: the
# library, the gpu test programs, astitch-run, astitch-bench, astitch-compile-time, plan_bench,
# and the shared libraries such a machine may lack (extra-libs/), and the Python package (python/) when the
# build made it (-Dbridge, for the GPU machine's interpreter: -Dpython=python3.12 there). Unpack it in the repository root there
# (tar -xJf ARCHIVE) to get the build folder back under its own name.
#
#   tools/pack-gpu-build.sh [BUILD [ARCHIVE]]    defaults: build-gpu, BUILD.tar.xz
set -euo pipefail

build="${1:-build-gpu}"
archive="${2:-$build.tar.xz}"
name="$(basename "$build")"
stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
dest="$stage/$name"
mkdir -p "$dest"/{lib,tests,tools,bench,extra-libs}
cp -a "$build"/lib/libastitch.so* "$dest/lib/"
rm -rf "$dest"/lib/*.p
cp "$build/tests/test_cuda" "$build/tests/test_dots" "$build/tests/test_exp_range" \
   "$build/tests/test_divide_shared" "$build/tests/test_gpu_diff" "$dest/tests/"
cp "$build/tools/astitch-run" "$dest/tools/"
cp "$build/bench/astitch-bench" "$build/bench/astitch-compile-time" "$build/bench/plan_bench" "$dest/bench/"
if [ -d "$build/python/astitch" ]; then
  mkdir -p "$dest/python/astitch/torch/ops"
  cp "$build"/python/astitch/*.py "$build"/python/astitch/*.so "$dest/python/astitch/"
  cp "$build"/python/astitch/torch/*.py "$dest/python/astitch/torch/"
  cp "$build"/python/astitch/torch/ops/*.py "$dest/python/astitch/torch/ops/"
fi
for lib in libcmocka.so.0 libjansson.so.4 libffi.so.8; do
  # awk reads to the end: leaving early would end ldconfig with SIGPIPE, failing the pipeline
  path="$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !p {p = $NF} END {print p}')"
  [ -n "$path" ] && cp -L "$path" "$dest/extra-libs/"
done
strip --strip-unneeded "$dest"/lib/libastitch.so.*.*.* "$dest"/tests/* "$dest"/tools/* "$dest"/bench/* \
  $(find "$dest/python" -name '*.so' 2>/dev/null)
# xz -9: its 64 MiB dictionary finds the copies of LLVM that the statically linked programs share
tar -C "$stage" -cf - "$name" | xz -9 -T0 > "$archive"
echo "$archive: $(du -h "$archive" | cut -f1)"
