#!/usr/bin/env bash
# What a quantized KV cache buys on this machine: `aoi replay` (one session, bars appended 20 at a time, a
# question timed at each checkpoint on the same state) once per KV cache setting, one after another, each in a
# process of its own with the same model, threads and batch: the KV bytes a token takes (so the sessions a GiB
# holds), the ingestion rate, the question's latency at each depth, and, where --naive names the setting, the
# same questions recomputed over the whole retained context with the same cache type (the answers must be the
# same tokens). bench/kv/report.py writes the table.
#
#   bench/kv/run.sh [--model PATH] [--checkpoints A,B,C] [--threads N] [--repeats N] [--naive LIST]
#                   [--out DIR] [--skip-build]
#
#   settings, each K:V:flash-attention: f16:f16:off (aoi's default), f16:f16:on, q8_0:f16:off, q8_0:q8_0:on,
#             q4_0:q4_0:on (a quantized V needs flash attention in llama.cpp)
#   --naive   the settings whose answers are also recomputed (default q8_0:f16:off,q8_0:q8_0:on; "none": none)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
command=$(bench_command bench/kv/run.sh "$@")
commit=$(bench_commit)

model=models/smollm2-135m-q8_0.gguf checkpoints=2600,8000,14800 threads=$(nproc) repeats=3
naive="q8_0:f16:off,q8_0:q8_0:on" out=bench-out/kv skip_build=0
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --checkpoints) checkpoints=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --naive) naive=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
if [ "$skip_build" = 0 ]; then bench_build aoi aoi-gen-model; fi
bench_model "$model"
mkdir -p "$out"
rm -f "$out"/kv-*.json
echo "== KV cache settings: $command (commit $commit); output in $out"
for setting in f16:f16:off f16:f16:on q8_0:f16:off q8_0:q8_0:on q4_0:q4_0:on; do
  IFS=: read -r k v fa <<<"$setting"
  name="$k-$v-fa-$fa"
  echo "== K $k, V $v, flash attention $fa"
  build/tools/aoi replay -m "$model" --checkpoints "$checkpoints" --threads "$threads" --repeats "$repeats" \
    --cache-type-k "$k" --cache-type-v "$v" --flash-attn "$fa" --modes stateful --commit "$commit" \
    --command "$command" --json "$out/kv-$name.json" >"$out/kv-$name.log" 2>&1
  tail -8 "$out/kv-$name.log" | sed -n '/answers:/,$p'
  case ",$naive," in
    *",$setting,"*)
      echo "== the same, recomputed (naive mode, one timed run a checkpoint)"
      build/tools/aoi replay -m "$model" --checkpoints "$checkpoints" --threads "$threads" --repeats 1 \
        --cache-type-k "$k" --cache-type-v "$v" --flash-attn "$fa" --modes naive --commit "$commit" \
        --command "$command" --json "$out/kv-$name-naive.json" >"$out/kv-$name-naive.log" 2>&1 ;;
  esac
done
python3 bench/kv/report.py "$out" | tee "$out/report.md"
echo "== bench/update_docs.py kv $out/report.md puts it into docs/benchmarks.md"
