#!/usr/bin/env bash
# Installs the Debian 12 packages astitch needs to build and test. Uses sudo when not root.
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config python3
  python3-dev python3-venv   # the Python package's extension and its test environment
  llvm-19-dev          # llvm-config-19 and the LLVM 19 C API
  libffi-dev           # calls into host-compiled kernels
  libcmocka-dev        # the test suites
  libjansson-dev       # graph.json
  libzstd-dev zlib1g-dev  # what LLVM links against (needed for -Dllvm_static=true)
  clang-19 libclang-rt-19-dev  # the fuzz target (tools/fuzz.sh): clang's libFuzzer
)

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi

export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${packages[@]}"
