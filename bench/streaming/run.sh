#!/usr/bin/env bash
# The streaming benchmark in one command: aoi (stateful), aoi (naive, recompute per question) and llama.cpp's
# llama-server (prompt cache on, one slot; with and without --cache-reuse) on the same model, threads, batch
# sizes, KV cache type and flash-attention setting (printed), fed the same bars; an append-only scenario and a
# sliding-window one timed as the paper does (the bars ingested before the question; aoi's ingestion of them
# timed on its own, beside llama-server's prefill inside its question), and an append-only one and a
# sliding-window one timed from the push of the bars to the answer. Every system answers a warm-up question
# first, one system is timed at a time while the others are idle, each question is timed three times (the
# median kept). Tables on stdout; CSV, JSON and PNG plots in the output folder; summary.md (the summary tables,
# with the commit and this command as typed) for docs/benchmarks.md through bench/update_docs.py.
#
#   bench/streaming/run.sh [--preset quick|cpu|paper] [--model PATH] [--threads N] [--out DIR]
#                          [--other NAME=URL] [--naive-every N] [--repeats N] [--evict-fraction F] [--gpu]
#                          [--skip-build] [--scenarios LIST]
#
#   --gpu             all layers on the GPU in aoi and llama-server (build with -DAOI_CUDA=ON first)
#   --evict-fraction  the share of the window aoi's recompute eviction removes when the window is full
#                     (default 0.25, the server's default: a rebuild every quarter of a window of new bars)
#   --scenarios       some of append-only,sliding-window,data-to-answer,data-to-answer-window (default: all
#                     four); summary.md has those
#
#   quick  the analyst model (models/analyst.gguf), short streams, each question type once (CI smoke test:
#          completes, aoi agrees with naive)
#   cpu    smollm2-135m shape, 100 bars, then 15 x 10 bars; window 100 bars; naive every 5th question
#   paper  the paper's sizes: 100 bars, then 15 x 55 bars; window 300 bars (smollm2-135m shape by default)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
# The command as typed and the commit, taken before the build (the tree the binaries come from).
command=$(bench_command bench/streaming/run.sh "$@")
commit=$(bench_commit)

preset=quick model="" threads=$(nproc) out="" other="" naive_every="" repeats="" skip_build=0 gpu=0
evict_fraction=0.25 scenarios=append-only,sliding-window,data-to-answer,data-to-answer-window
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --other) other=$2; shift 2 ;;
    --naive-every) naive_every=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --evict-fraction) evict_fraction=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    --gpu) gpu=1; shift ;;
    --scenarios) scenarios=$2; shift 2 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

case "$preset" in
  quick)  # ~80 bars at most, 30 tokens each with the analyst model's vocabulary
    initial=20 per=10 iterations=7 window=40 max_tokens=8 every=${naive_every:-1} ctx=6144 runs=${repeats:-1}
    default_model=models/analyst.gguf ;;
  cpu)    # the paper's run scaled to what 2 CPU cores do in ~30 min: 250 bars at most (~9K tokens)
    initial=100 per=10 iterations=15 window=100 max_tokens=8 every=${naive_every:-5} ctx=12288 runs=${repeats:-3}
    default_model=models/smollm2-135m-q8_0.gguf ;;
  paper)  # 925 bars at most: ~33K tokens with Llama 3's tokenizer
    initial=100 per=55 iterations=15 window=300 max_tokens=8 every=${naive_every:-1} ctx=34816 runs=${repeats:-3}
    default_model=models/smollm2-135m-q8_0.gguf ;;
  *) echo "presets: quick, cpu, paper" >&2; exit 2 ;;
esac
model=${model:-$default_model}
out=${out:-bench-out/$preset}

if [ "$skip_build" = 0 ]; then
  bench_build llama-server aoi-bench-streaming
fi
bench_model "$model"
mkdir -p "$out"

aoi_gpu=() llama_gpu=()
[ "$gpu" = 1 ] && aoi_gpu=(--n-gpu-layers -1) && llama_gpu=(-ngl 999)
# The same engine settings on both sides, pinned rather than left to each server's defaults (llama-server's
# flash attention is "auto", which turns it on where aoi's default is off).
batch=512 kv_type=f16 fa=off
settings="model $(basename "$model"), $threads threads (decode and prefill), batch $batch, ubatch $batch, KV cache $kv_type, flash attention $fa, $([ "$gpu" = 1 ] && echo "all layers on the GPU" || echo "CPU")"

# aoi: stateful and naive in separate processes, so that each is timed alone. A server has three sequences
# (the session's, a completion slot, a spare for recompute eviction's rebuilds), each holding the whole stream.
# The servers start in this shell (bench/lib.sh); each start sets $url.
start_aoi() {  # name cells-per-sequence
  local port; port=$(free_port)
  build/tools/aoi serve -m "$model" --port "$port" --threads "$threads" --ctx-size $((3 * $2)) --max-sessions 1 \
    --pool-slots 1 --spare-seqs 1 --memory-only -b "$batch" --ubatch-size "$batch" --cache-type-k "$kv_type" \
    --cache-type-v "$kv_type" --flash-attn "$fa" "${aoi_gpu[@]}" >"$out/$1.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:$port" "$out/$1.log"
  url="http://127.0.0.1:$port"
}
start_llama() {  # name [extra args]
  local name=$1; shift
  local port; port=$(free_port)
  # --cache-ram 0: llama-server keeps the prompts it has seen in host memory and restores the closest one. A
  # question of the stream is a prompt never seen before, but a question timed three times is one seen
  # before: the second and third runs restored it (a sliding window's 3.5K-token prompt in 20 ms, where its
  # first run took 16 s). The slot's own cache, which holds the previous question's prompt, stays on.
  build/bin/llama-server -m "$model" --port "$port" -t "$threads" -tb "$threads" -c "$ctx" -np 1 -b "$batch" \
    -ub "$batch" -ctk "$kv_type" -ctv "$kv_type" -fa "$fa" --cache-ram 0 "${llama_gpu[@]}" "$@" \
    >"$out/$name.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:$port" "$out/$name.log"
  url="http://127.0.0.1:$port"
}

echo "== streaming benchmark: $command"
echo "== preset $preset: $model, output in $out"
echo "== engine settings, every server: $settings"
# Sessions hold ctx tokens of bars, the system text and a question.
start_aoi aoi $((ctx + 1024)); aoi_url=$url
start_aoi aoi-naive $((ctx + 1024)); naive_url=$url
start_aoi aoi-shift $((ctx + 1024)); shift_url=$url
start_llama llama-server; llama_url=$url
start_llama llama-server-reuse --cache-reuse 256; reuse_url=$url
systems=(--system "aoi=aoi:$aoi_url" --system "aoi-naive=aoi-naive:$naive_url@$every"
         --system "llama-server=llama:$llama_url" --system "llama-server-reuse=llama:$reuse_url")
[ -n "$other" ] && systems+=(--system "${other%%=*}=openai:${other#*=}")

common=(--initial-bars "$initial" --bars-per-iteration "$per" --iterations "$iterations" --max-tokens "$max_tokens"
        --retention-tokens "$((ctx - 512))" --repeats "$runs" --settings "$settings" --out "$out" --require-agreement)
status=0
labels=()
for label in ${scenarios//,/ }; do
  case "$label" in
    append-only) extra=() ;;
    sliding-window) extra=(--window "$window" --evict-fraction "$evict_fraction"
                           --system "aoi-shift=aoi-shift:$shift_url") ;;
    data-to-answer) extra=(--timing data-to-answer) ;;
    data-to-answer-window) extra=(--timing data-to-answer --window "$window" --evict-fraction "$evict_fraction"
                                  --system "aoi-shift=aoi-shift:$shift_url") ;;
    *) echo "unknown scenario $label (append-only, sliding-window, data-to-answer, data-to-answer-window)" >&2
       exit 2 ;;
  esac
  labels+=("$label")
  build/bench/aoi-bench-streaming --label "$label" "${common[@]}" "${systems[@]}" "${extra[@]}" |
    tee "$out/$label.md" || status=$?
  echo
done

# The summary tables for the docs, naming the commit (taken when the run started), the command as typed and the
# settings.
{
  echo "Measured at commit \`$commit\`: \`$command\`"
  echo
  echo "Preset $preset: $initial bars, then $iterations x $per bars; window $window bars, aoi's recompute eviction" \
    "taking it down to $(python3 -c "import math; print(math.floor($window * (1 - $evict_fraction)))") bars when" \
    "full (evict_fraction $evict_fraction; aoi-shift evicts one bar per bar, so its window holds more bars than" \
    "aoi's); aoi-naive on one question in $every and the last."
  echo "Engine settings, every server: $settings. llama-server: one slot, its prompt cache on, its host-memory" \
    "prompt cache off (--cache-ram 0). Timed runs per question: $runs (the median kept; data-to-answer: 1)."
  echo
  echo "Ingestion: each aoi session's time from the push of an iteration's bars to their ingestion (rebuilds" \
    "included), timed one session at a time before the question and not part of its timing; in the" \
    "data-to-answer scenarios it is inside the timing. Prefill: llama-server's own prompt-processing time" \
    "(timings.prompt_ms) inside its question's timing, and the prompt tokens it did not find cached."
  echo
  echo "A speedup is given only where the two systems differ by more than their noise: where their timings'" \
    "ranges over the repeats overlap (or their means differ by less than the wider range), or where the" \
    "per-question ratios fall on both sides of 1 (their middle half spans 1: no consistent difference), it" \
    "reads \"equal (within noise)\"; \"(one run)\" marks a single question timed once."
  for label in "${labels[@]}"; do
    echo
    echo "#### $label"
    cat "$out/$label.summary.md"
  done
} >"$out/summary.md"
[ "$status" = 3 ] && echo "== aoi and aoi-naive answered differently (see above)" >&2
echo "== done: $out (summary: $out/summary.md)"
exit "$status"
