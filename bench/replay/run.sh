#!/usr/bin/env bash
# The docs' table of a session against a full recompute, in process: runs `aoi replay` (stateful and naive
# mode, one at a time, each warmed up, each question timed --repeats times and the median kept) at this
# checkout's commit, and writes its markdown for bench/update_docs.py.
#
#   bench/replay/run.sh [--model PATH] [--out FILE] [--skip-build] [aoi replay options...]
#
#   --model  default models/smollm2-135m-q8_0.gguf (generated when missing)
#   --out    default bench-out/replay.md; then: bench/update_docs.py replay FILE
# Every other option goes to `aoi replay` (build/tools/aoi replay --help): --checkpoints, --threads,
# --repeats, --batch-size, --flash-attn, ...
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
# The command as typed and the commit, taken before the build (the tree the binaries come from).
command=$(bench_command bench/replay/run.sh "$@")
commit=$(bench_commit)

model=models/smollm2-135m-q8_0.gguf out=bench-out/replay.md skip_build=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -m|--model) model=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

if [ "$skip_build" = 0 ]; then bench_build aoi aoi-gen-model; fi
bench_model "$model"
mkdir -p "$(dirname "$out")"
build/tools/aoi replay -m "$model" --commit "$commit" --command "$command" --markdown "$out" "${args[@]}"
echo "== wrote $out; bench/update_docs.py replay $out puts it into docs/benchmarks.md"
