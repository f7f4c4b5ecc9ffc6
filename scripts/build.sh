#!/usr/bin/env bash
# Configures and builds aoi (and the llama.cpp library it needs) in a build directory.
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]      default BUILD_DIR: build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
jobs=${AOI_JOBS:-$(nproc)}
launcher=()
if command -v ccache >/dev/null 2>&1; then
  # The compiler cache shares llama.cpp's objects between build directories (build, build-asan, build-tsan
  # compile it with the same flags); paths under the checkout are hashed relative to it.
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=${AOI_BUILD_TYPE:-Release} -DAOI_WERROR=ON "${launcher[@]}" "$@" \
  >/dev/null
cmake --build "$dir" -j"$jobs"
