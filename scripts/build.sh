#!/usr/bin/env bash
# Configures and builds aoi (and the llama.cpp library it needs) in a build directory.
#   scripts/build.sh [BUILD_DIR] [extra cmake args...]      default BUILD_DIR: build
# The compiler's output goes where this script's goes. With AOI_STAGE_LOG=FILE (scripts/run.sh sets it),
# configuring and building print one progress line each instead, their output appended to FILE, and its last
# 40 lines shown if one fails; AOI_VERBOSE=1 (or CI=true) shows it live as well (scripts/lib/stages.sh).
# AOI_TARGETS="a b" builds those targets (and what they need) only.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source-path=SCRIPTDIR source=lib/stages.sh
. "$root/scripts/lib/stages.sh"
dir=${1:-$root/build}
shift || true
jobs=${AOI_JOBS:-$(nproc)}
targets=()
for t in ${AOI_TARGETS:-}; do targets+=(--target "$t"); done
launcher=()
if command -v ccache >/dev/null 2>&1; then
  # The compiler cache shares llama.cpp's objects between build directories (build, build-asan, build-tsan
  # compile it with the same flags); paths under the checkout are hashed relative to it.
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
configure=(cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE="${AOI_BUILD_TYPE:-Release}" -DAOI_WERROR=ON
           "${launcher[@]}" "$@")
if [ -z "${AOI_STAGE_LOG:-}" ]; then
  "${configure[@]}" >/dev/null
  cmake --build "$dir" -j"$jobs" "${targets[@]}"
  exit 0
fi
if [ -x "$dir/tools/aoi" ]; then
  what="building what changed with $jobs jobs"
else
  what="building llama.cpp and aoi with $jobs jobs (the first time: about 15 minutes on 2 cores)"
fi
stage_run "configuring $dir" "${configure[@]}"
stage_run --progress "$what" cmake --build "$dir" -j"$jobs" "${targets[@]}"
