#!/usr/bin/env bash
# The durability benchmark in one command (prints, never asserts): on the same model file, threads and batch,
#   1. snapshots of sessions of 2K, 8K and 15K tokens: aoi's save and restore against llama-server's slot save
#      and restore of exactly the same tokens (--slot-save-path), one server timed at a time;
#   2. a restart: 8 sessions of 8K tokens filled (the cost of re-ingesting them), the server stopped and
#      started again, and the time until all 8 answer;
#   3. push latency over HTTP and ingestion rate per fsync policy (always, everysec, no) and in memory only.
# Both servers run with the same engine settings, pinned (threads for decode and prefill, batch and micro-batch,
# KV cache type, flash attention). report.py turns the outputs into the table, naming this command as typed
# and the commit.
#
#   bench/durability/run.sh [--preset quick|cpu] [--model PATH] [--threads N] [--out DIR] [--skip-build]
#
#   quick  the tiny test model, small sessions (smoke test: every phase completes)
#   cpu    smollm2-135m shape, the sizes above (about 30 minutes on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
command=$(bench_command bench/durability/run.sh "$@")
commit=$(bench_commit)

preset=cpu model="" threads=$(nproc) out="" skip_build=0
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
case "$preset" in
  quick) sizes=256,1024 restart_sessions=2 restart_tokens=512 pushes=200 burst=20 reps=1
         default_model=build/models/test-micro.gguf ;;
  cpu)   sizes=2048,8192,15000 restart_sessions=8 restart_tokens=8192 pushes=2000 burst=150 reps=3
         default_model=models/smollm2-135m-q8_0.gguf ;;
  *) echo "presets: quick, cpu" >&2; exit 2 ;;
esac
model=${model:-$default_model}
out=${out:-bench-out/durability-$preset}
batch=512 kv_type=f16
max_size=${sizes##*,}

if [ "$skip_build" = 0 ]; then
  bench_build llama-server aoi-bench-durability
fi
bench_model "$model"
rm -rf "$out"
mkdir -p "$out"

start_aoi() {  # log, then aoi serve options; sets $url
  local log=$1 port; shift
  port=$(free_port)
  build/tools/aoi serve -m "$model" --port "$port" "${aoi_engine[@]}" --pool-slots 1 --spare-seqs 1 "$@" \
    >"$log" 2>&1 &
  pids+=($!)
  url="http://127.0.0.1:$port"
  wait_ready "$url" "$log"
}
bench() { build/bench/aoi-bench-durability --out "$out" "$@"; }

# The same engine settings on both servers, pinned rather than left to each server's defaults.
aoi_engine=(--threads "$threads" --batch-size "$batch" --ubatch-size "$batch" --cache-type-k "$kv_type"
            --cache-type-v "$kv_type" --flash-attn off)
llama_engine=(-t "$threads" -tb "$threads" -b "$batch" -ub "$batch" -ctk "$kv_type" -ctv "$kv_type" -fa off)
cat >"$out/settings.json" <<JSON
{"preset": "$preset", "model": $(json_string "$model"), "threads": $threads, "batch": $batch, "flash_attn": "off",
 "kv_type": "$kv_type", "sizes": [$sizes], "restart_sessions": $restart_sessions, "restart_tokens": $restart_tokens,
 "pushes": $pushes, "reps": $reps, "commit": "$commit", "command": $(json_string "$command"),
 "aoi_engine_args": $(json_string "${aoi_engine[*]}"), "llama_engine_args": $(json_string "${llama_engine[*]}")}
JSON
echo "== durability benchmark: $command"
echo "== $model; output in $out"
echo "== aoi serve ${aoi_engine[*]}; llama-server ${llama_engine[*]}"

# 1. Snapshots, side by side with llama-server's slot save/restore (one slot holding the same tokens).
cells=$(( (max_size + 4096 + 255) / 256 * 256 ))
lport=$(free_port)
mkdir -p "$out/slots"
build/bin/llama-server -m "$model" --port "$lport" -c "$cells" -np 1 "${llama_engine[@]}" \
  --slot-save-path "$out/slots" >"$out/llama-server.log" 2>&1 &
pids+=($!)
wait_ready "http://127.0.0.1:$lport" "$out/llama-server.log"
start_aoi "$out/aoi-snapshot.log" --data-dir "$out/data-snapshot" --max-sessions 1 --ctx-size $((4 * cells))
bench --phase snapshot --aoi "$url" --llama "http://127.0.0.1:$lport" --sizes "$sizes" --reps "$reps"
stop_servers

# 2. A restart: fill, stop cleanly (every session snapshotted), start again, time until all answer.
rcells=$(( (restart_tokens + 4096 + 255) / 256 * 256 ))
rargs=(--data-dir "$out/data-restart" --max-sessions "$restart_sessions" --ctx-size $(( (restart_sessions + 2) * rcells )))
start_aoi "$out/aoi-fill.log" "${rargs[@]}"
bench --phase fill --aoi "$url" --sessions "$restart_sessions" --tokens "$restart_tokens"
stop_servers
du -sb "$out/data-restart" | awk '{print $1}' >"$out/restart-bytes"
t0=$(date +%s.%N)
start_aoi "$out/aoi-restart.log" "${rargs[@]}"
t_ready=$(date +%s.%N)
bench --phase answer --aoi "$url" --sessions "$restart_sessions"
t_all=$(date +%s.%N)
python3 -c "import json,sys; json.dump({'ready_s': $t_ready - $t0, 'all_answering_s': $t_all - $t0}, open('$out/restart-times.json', 'w'))"
stop_servers

# 3. Push latency and ingestion rate per fsync policy, and with no data directory.
for policy in always everysec no memory; do
  if [ "$policy" = memory ]; then
    start_aoi "$out/aoi-push-$policy.log" --memory-only --max-sessions 1 --ctx-size $((3 * 8192))
  else
    start_aoi "$out/aoi-push-$policy.log" --data-dir "$out/data-push-$policy" --fsync "$policy" --max-sessions 1 \
      --ctx-size $((3 * 8192))
  fi
  bench --phase push --aoi "$url" --pushes "$pushes" --burst "$burst" --label "$policy"
  stop_servers
done
rm -rf "$out"/data-* "$out/slots"
python3 bench/durability/report.py "$out" | tee "$out/report.md"
