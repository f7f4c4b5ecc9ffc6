#!/usr/bin/env bash
# Trains the analyst model again from a clean checkout, on the CPU, and writes it to models/analyst.gguf:
# installs what training needs (scripts/setup.sh --train: PyTorch, NumPy and OpenBLAS from Debian, llama.cpp's
# pinned tree for its gguf-py), builds the data tools in the build directory (aoi-analyst-data writes the
# windows, aoi-analyst-tokens tokenizes them as a session does: llama.cpp's library the first time), trains
# (scripts/train_analyst.py), prints the held-out accuracy and writes the GGUF. About 75 minutes on an idle
# 2-core machine with the defaults and the tools built (their first build adds about a quarter of an hour);
# models/analyst.md says what the committed model was trained with.
#
#   scripts/train-analyst.sh [--out FILE] [train_analyst.py options: --steps N --seed S ...]
#   AOI_BUILD_DIR=DIR ...     the build directory (default: build, the one scripts/build.sh makes)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

out=models/analyst.gguf
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

start=$(date +%s)
scripts/setup.sh --train

build=${AOI_BUILD_DIR:-$root/build}
echo "train-analyst: building the data tools in $build"
AOI_TARGETS="aoi-analyst-data aoi-analyst-tokens" scripts/build.sh "$build"

work=$(mktemp -d "${TMPDIR:-/tmp}/aoi-train.XXXXXX")
trap 'rm -rf "$work"' EXIT

mkdir -p "$(dirname "$out")"
# PyTorch runs its own two threads; OpenBLAS's would compete with them for the same cores (twice as slow).
OPENBLAS_NUM_THREADS=1 /usr/bin/python3 scripts/train_analyst.py --data-tool "$build/tools/aoi-analyst-data" \
  --tokens-tool "$build/tools/aoi-analyst-tokens" \
  --gguf-py deps/llama.cpp/gguf-py --out "$out" --checkpoint "$work/analyst.pt" "${args[@]}"
echo "train-analyst: done in $((($(date +%s) - start) / 60)) min: $out ($(du -h "$out" | cut -f1))"
