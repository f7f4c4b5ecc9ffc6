#!/usr/bin/env bash
# The multi-tenant benchmark in one command: for each N, a fresh aoi server and a fresh llama-server -np N
# (prompt cache on, host-memory prompt cache off: --cache-ram 0) on the same model, with the same engine
# settings pinned on both (threads for decode and prefill, batch and micro-batch, KV cache type, flash
# attention), as bench/streaming/run.sh pins them; the client (multitenant_bench.cpp) times one system at a
# time. Raw prefill (llama-bench) at the sessions' mean depth gives the reference for aggregate ingestion.
# report.py turns the outputs into the table, naming this command as typed and the commit.
#
#   bench/multitenant/run.sh [--preset quick|cpu] [--model PATH] [--threads N] [--sessions 1,2,4,8,16]
#                            [--tokens N] [--per BARS] [--flash-attn on|off] [--budgets MS,MS] [--out DIR]
#                            [--no-llama] [--skip-build]
#
#   --per: new bars per stream between questions against llama-server (the paper's scenario has 55)
#   --budgets: aoi once per pass-time budget (--interactive-budget-ms; 0: off), one after another, for each N
#
#   quick  a tiny generated model and short contexts (smoke test: every phase completes)
#   cpu    smollm2-135m shape, sessions of 4K tokens, N = 1, 2, 4, 8, 16 (about an hour on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
command=$(bench_command bench/multitenant/run.sh "$@")
commit=$(bench_commit)

preset=cpu model="" threads=$(nproc) out="" skip_build=0 llama=1 fa=off sessions="" tokens="" per_arg="" budgets=""
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    --tokens) tokens=$2; shift 2 ;;
    --per) per_arg=$2; shift 2 ;;
    --flash-attn) fa=$2; shift 2 ;;
    --budgets) budgets=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-llama) llama=0; shift ;;
    --skip-build) skip_build=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

case "$preset" in
  quick) default_sessions=1,2 default_tokens=512 questions=3 iterations=1 per=2 backlog=8 answer=4 sustain=5
         default_model=build/models/test-micro.gguf ;;
  cpu)   default_sessions=1,2,4,8,16 default_tokens=4096 questions=12 iterations=3 per=5 backlog=100 answer=24
         sustain=45
         default_model=models/smollm2-135m-q8_0.gguf ;;
  *) echo "presets: quick, cpu" >&2; exit 2 ;;
esac
model=${model:-$default_model}
per=${per_arg:-$per}
sessions=${sessions:-$default_sessions}
tokens=${tokens:-$default_tokens}
out=${out:-bench-out/multitenant-$preset}
# The same engine settings on both servers, pinned rather than left to each server's defaults.
batch=512 kv_type=f16

if [ "$skip_build" = 0 ]; then
  bench_build llama-server llama-bench aoi-bench-multitenant
fi
bench_model "$model"
mkdir -p "$out"
rm -f "$out"/results-*.json

round256() { echo $(( ($1 + 255) / 256 * 256 )); }

# What both servers are given besides their model, ports and sizes (printed in the report's header).
# --cache-ram 0: llama-server's host-memory prompt cache off, as in the streaming benchmark (a slot keeps its
# own last prompt: its prompt cache stays on).
aoi_engine=(--threads "$threads" --batch-size "$batch" --ubatch-size "$batch" --cache-type-k "$kv_type"
            --cache-type-v "$kv_type" --flash-attn "$fa")
llama_engine=(-t "$threads" -tb "$threads" -b "$batch" -ub "$batch" -ctk "$kv_type" -ctv "$kv_type" -fa "$fa"
              --cache-ram 0)
cat >"$out/settings.json" <<JSON
{"preset": "$preset", "model": $(json_string "$model"), "threads": $threads, "batch": $batch, "flash_attn": "$fa",
 "kv_type": "$kv_type", "tokens": $tokens, "answer_tokens": $answer, "questions": $questions,
 "iterations": $iterations, "bars_per_iteration": $per, "backlog_bars": $backlog, "sustain_s": $sustain, "commit": "$commit",
 "command": $(json_string "$command"), "aoi_engine_args": $(json_string "${aoi_engine[*]}"),
 "llama_engine_args": $(json_string "${llama_engine[*]}"), "llama": $([ "$llama" = 1 ] && echo true || echo false)}
JSON
echo "== multi-tenant benchmark: $command"
echo "== $model, N = $sessions, sessions of $tokens tokens; output in $out"
echo "== aoi serve ${aoi_engine[*]}; llama-server ${llama_engine[*]}"

# llama.cpp's prefill at the sessions' mean depth during ingestion, same batch, threads, KV cache type and
# flash attention.
fa_flag=0; [ "$fa" = on ] && fa_flag=1
build/bin/llama-bench -m "$model" -t "$threads" -b "$batch" -ub "$batch" -ctk "$kv_type" -ctv "$kv_type" \
  -fa "$fa_flag" -p "$batch" -n 0 -d $((tokens / 2)) -r 3 -o json >"$out/llama-bench.json" 2>"$out/llama-bench.log"

IFS=, read -r -a ns <<<"$sessions"
for n in "${ns[@]}"; do
  # aoi: a sequence per session holding its window (its bars, the llama rounds and the backlog), a question
  # and the system text; a completion slot and a spare, of the same size.
  window=$((tokens + (backlog + (iterations + 4) * per + 8) * 70))
  seqs=$(( n + 2 ))
  cells=$(( seqs * $(round256 $(( window + 1024 ))) ))
  # aoi once per budget (or once with its default), llama-server beside the first only.
  IFS=, read -r -a bs <<<"${budgets:--1}"
  first=1
  for b in "${bs[@]}"; do
    budget_args=() client_budget=() log="$out/aoi-$n.log"
    if [ "$b" != -1 ]; then
      budget_args=(--interactive-budget-ms "$b") client_budget=(--budget-ms "$b") log="$out/aoi-$n-budget-$b.log"
    fi
    port=$(free_port)
    build/tools/aoi serve -m "$model" --port "$port" --ctx-size "$cells" --max-sessions "$n" --pool-slots 1 \
      --spare-seqs 1 --memory-only "${aoi_engine[@]}" "${budget_args[@]}" >"$log" 2>&1 &
    pids+=($!)
    wait_ready "http://127.0.0.1:$port" "$log"
    aoi_url="http://127.0.0.1:$port"
    llama_args=()
    if [ "$llama" = 1 ] && [ "$first" = 1 ]; then
      lport=$(free_port)
      slot=$(round256 $(( tokens + (iterations + 2) * per * 70 + 1024 )))
      build/bin/llama-server -m "$model" --port "$lport" -c $(( n * slot )) -np "$n" "${llama_engine[@]}" \
        >"$out/llama-server-$n.log" 2>&1 &
      pids+=($!)
      wait_ready "http://127.0.0.1:$lport" "$out/llama-server-$n.log"
      llama_args=(--llama "http://127.0.0.1:$lport")
    fi
    build/bench/aoi-bench-multitenant --aoi "$aoi_url" "${llama_args[@]}" --sessions "$n" --tokens "$tokens" \
      --answer-tokens "$answer" --questions "$questions" --iterations "$iterations" --bars-per-iteration "$per" \
      --backlog "$backlog" --sustain-s "$sustain" --out "$out" "${client_budget[@]}"
    stop_servers
    first=0
  done
done
python3 bench/multitenant/report.py "$out" | tee "$out/report.md"
