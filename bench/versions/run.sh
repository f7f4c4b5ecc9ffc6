#!/usr/bin/env bash
# aoi at two or more commits, side by side: push latency, flash hits, a question beside 7 idle and 7 ingesting
# neighbours, ingestion against llama.cpp's prefill (versions_bench.py says how each is measured). Each commit
# is built in its own worktree under --out; the multi-tenant client is this checkout's.
#
#   bench/versions/run.sh [--model PATH] [--out DIR] [--skip-build] [versions_bench.py options...] REV REV...
#
#   --model  default models/smollm2-135m-q8_0.gguf (generated when missing)
#   e.g.     bench/versions/run.sh --rounds 3 a7fb335 HEAD
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
command=$(bench_command bench/versions/run.sh "$@")

model=models/smollm2-135m-q8_0.gguf skip_build=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -m|--model) model=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done
if [ "$skip_build" = 0 ]; then
  bench_build aoi-bench-multitenant aoi-gen-model
fi
bench_model "$model"
python3 bench/versions/versions_bench.py --model "$model" --client build/bench/aoi-bench-multitenant \
  --command "$command" "${args[@]}"
