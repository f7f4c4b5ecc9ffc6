#!/usr/bin/env bash
# Configures and builds aoi (and the llama.cpp library it needs) in a build directory.
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]      default BUILD_DIR: build
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/build}
shift || true
jobs=${AOI_JOBS:-$(nproc)}
cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=${AOI_BUILD_TYPE:-Release} -DAOI_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j"$jobs"
