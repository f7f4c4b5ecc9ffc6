#!/usr/bin/env bash
# The docs' tables of ingestion against llama.cpp's own prefill, and of a question behind a backlog: runs
# aoi-bench-ingest (one system timed at a time, each warmed up, every measurement repeated and the median
# kept) at this checkout's commit, and writes its markdown for bench/update_docs.py.
#
#   bench/ingest/run.sh [--model PATH] [--out FILE] [--skip-build] [aoi-bench-ingest options...]
#
#   --model  default models/smollm2-135m-q8_0.gguf (generated when missing)
#   --out    default bench-out/ingest.md; then: bench/update_docs.py ingest FILE
# Every other option goes to aoi-bench-ingest (build/bench/aoi-bench-ingest --help): --depths, --tokens,
# --repeats, --queries, --threads, --batch, --flash-attn.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
# The command as typed and the commit, taken before the build (the tree the binaries come from).
command=$(bench_command bench/ingest/run.sh "$@")
commit=$(bench_commit)

model=models/smollm2-135m-q8_0.gguf out=bench-out/ingest.md skip_build=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    -m|--model) model=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    *) args+=("$1"); shift ;;
  esac
done

if [ "$skip_build" = 0 ]; then bench_build aoi-bench-ingest aoi-gen-model; fi
bench_model "$model"
mkdir -p "$(dirname "$out")"
build/bench/aoi-bench-ingest -m "$model" --commit "$commit" --command "$command" --markdown "$out" \
  "${args[@]}"
echo "== wrote $out; bench/update_docs.py ingest $out puts it into docs/benchmarks.md"
