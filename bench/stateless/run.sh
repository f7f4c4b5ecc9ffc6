#!/usr/bin/env bash
# The stateless benchmark in one command (prints, never asserts): aoi's OpenAI-compatible /v1/chat/completions
# side by side with llama.cpp's llama-server, on the same model file, threads, batch and micro-batch, KV cache
# type and flash-attention setting (pinned on both, printed), llama-server with -np equal to aoi's completion
# slots and the same cells per slot as an aoi pool sequence, its prompt cache on. Scenarios (the client is
# stateless_bench.py, greedy, every request streamed and timed to its first and last token):
#   multiturn       one client, 10 turns, each sending the whole conversation so far: latency per turn
#   shared          8 clients, one ~1,000-token system prompt, a question of its own per request: throughput
#                   and p50/p99 latency, the first round (cold: no prefix cached anywhere) and the later ones
#   copy            answers that quote the prompt, at 1 and 8 clients, prompt-lookup drafting on and off
#                   (aoi --draft-max; llama-server's n-gram speculative decoding): generated tokens/s and the
#                   drafts' acceptance (a model that does not copy shows as such)
#   response-cache  aoi only: the same request twice (the repeat is answered from aoi's response cache)
# Every scenario gets a fresh server per system, one system runs at a time (the other is stopped), every
# server answers warm-up requests of their own first, and every measurement is repeated (the median kept).
# report.py turns the raw results into summary.md (the tables, the targets, the commit and this command as
# typed), which `bench/update_docs.py stateless OUT/summary.md` puts into docs/benchmarks.md.
#
#   bench/stateless/run.sh [--preset quick|cpu] [--model PATH] [--copy-model PATH] [--threads N] [--out DIR]
#                          [--scenarios LIST] [--repeats N] [--slots N] [--aoi-args ARGS] [--llama-args ARGS]
#                          [--llama-spec ARGS] [--no-llama] [--skip-build]
#
#   --copy-model  the model of the copy scenario (default: the preset's generated copy model when
#                 aoi-gen-model has --weights copy, else --model, which does not copy: its acceptance shows it)
#   --scenarios   some of multiturn,shared,copy,response-cache (default: all)
#   --aoi-args, --llama-args   more flags for every aoi / llama-server (e.g. --aoi-args "--prefix-cache-cells 0")
#   --llama-spec  llama-server's drafting flags for the copy scenario (default: the n-gram lookup below)
#
#   quick  the tiny test model, few and short requests (smoke test: every scenario completes, ~2 minutes)
#   cpu    smollm2-135m shape Q8_0, 2 threads, the sizes above, three repeats (~35 minutes on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
command=$(bench_command bench/stateless/run.sh "$@")
commit=$(bench_commit)

preset=quick model="" copy_model="" threads="" out="" skip_build=0 llama=1 repeats="" slots=8
scenarios=multiturn,shared,copy,response-cache aoi_extra="" llama_extra=""
# llama-server's prompt lookup: the last 3 tokens looked up in the slot's tokens (prompt and answer so far),
# the (up to) 8 that followed them drafted, as aoi drafts up to --draft-max 8.
llama_spec="--spec-type ngram-simple --spec-ngram-simple-size-n 3 --spec-ngram-simple-size-m 8"
while [ $# -gt 0 ]; do
  case "$1" in
    --preset) preset=$2; shift 2 ;;
    --model) model=$2; shift 2 ;;
    --copy-model) copy_model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --scenarios) scenarios=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --slots) slots=$2; shift 2 ;;
    --aoi-args) aoi_extra=$2; shift 2 ;;
    --llama-args) llama_extra=$2; shift 2 ;;
    --llama-spec) llama_spec=$2; shift 2 ;;
    --no-llama) llama=0; shift ;;
    --skip-build) skip_build=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done

# Per scenario: max_tokens; multiturn turns; shared: system prompt words, rounds per client; copy: passage
# lines, requests per client alone and at 8 clients. cells: KV cells of one slot (aoi pool sequence, llama-server
# slot), enough for the longest conversation.
case "$preset" in
  quick) mt_tokens=8 turns=10 sh_tokens=8 sh_words=300 rounds=2 cp_lines=4 cp_tokens=64 cp_alone=2 cp_each=1
         rc_tokens=16 cells=1024 runs=${repeats:-2} threads=${threads:-$(nproc)}
         default_model=build/models/test-micro.gguf default_copy=build/models/copy-micro.gguf ;;
  cpu)   mt_tokens=48 turns=10 sh_tokens=24 sh_words=750 rounds=4 cp_lines=8 cp_tokens=200 cp_alone=3 cp_each=2
         rc_tokens=48 cells=2048 runs=${repeats:-3} threads=${threads:-2}
         default_model=models/smollm2-135m-q8_0.gguf default_copy=models/smollm2-135m-copy-q8_0.gguf ;;
  *) echo "presets: quick, cpu" >&2; exit 2 ;;
esac
model=${model:-$default_model}
out=${out:-bench-out/stateless-$preset}
clients=8

if [ "$skip_build" = 0 ]; then
  bench_build llama-server aoi aoi-gen-model
fi
bench_model "$model"

# The copy model: generated by aoi-gen-model --weights copy where the generator has it (same shape and type as
# the preset's model); otherwise the ordinary model stands in, and the acceptance rate shows that it does not copy.
copy_note=""
if [ -z "$copy_model" ]; then
  gen_help=$(build/tools/aoi-gen-model --help 2>&1 || true)
  if grep -q -- "--weights" <<<"$gen_help"; then
    copy_model=$default_copy
    bench_model "$copy_model"
  else
    copy_model=$model
    copy_note="aoi-gen-model has no --weights copy yet: a model that does not copy"
    echo "== note: $copy_note" >&2
  fi
fi
[ -f "$copy_model" ] || { echo "no copy model at $copy_model" >&2; exit 2; }

mkdir -p "$out/results"
rm -f "$out"/results/*.json "$out"/*.log

# What this aoi has: the flags added for the stateless endpoints are used where it has them.
aoi_help=$(build/tools/aoi serve --help 2>&1 || true)
has_flag() { grep -q -- "$1" <<<"$aoi_help"; }
draft_on=() draft_off=()
if has_flag --draft-max; then draft_on=(--draft-max 8) draft_off=(--draft-max 0); fi

# The same engine settings on both sides, pinned rather than left to each server's defaults.
batch=512 kv_type=f16 fa=off
# aoi: one session sequence (none is used), $slots completion slots, one spare; every sequence $cells cells.
seqs=$((1 + slots + 1))
aoi_base=(-m "$model" --threads "$threads" --ctx-size $((seqs * cells)) --max-sessions 1 --pool-slots "$slots"
          --spare-seqs 1 --memory-only -b "$batch" --ubatch-size "$batch" --cache-type-k "$kv_type"
          --cache-type-v "$kv_type" --flash-attn "$fa")
# llama-server: $slots slots of $cells cells each (-np given, so no unified KV cache: each slot its own cells);
# its prompt cache: each slot keeps its last prompt (cache_prompt, on by default), and --cache-ram is left at
# its default (8192 MiB of host memory for prompts moved out of the slots).
llama_base=(-t "$threads" -tb "$threads" -c $((slots * cells)) -np "$slots" -b "$batch" -ub "$batch"
            -ctk "$kv_type" -ctv "$kv_type" -fa "$fa")
read -r -a aoi_more <<<"$aoi_extra"
read -r -a llama_more <<<"$llama_extra"
read -r -a llama_spec_args <<<"$llama_spec"

llama_version=$(build/bin/llama-server --version 2>&1 | grep -m1 -i version || echo unknown)
settings="$threads threads (decode and prefill), batch $batch, ubatch $batch, KV cache $kv_type, flash attention $fa"
settings+=", CPU"
has_json() { has_flag "$1" && echo True || echo False; }
# settings.json: what report.py names in the summary (values through the environment: no quoting to get wrong).
S_PRESET=$preset S_COMMIT=$commit S_COMMAND=$command S_MODEL=$model S_COPY_MODEL=$copy_model S_COPY_NOTE=$copy_note \
S_SETTINGS=$settings S_AOI_ARGS="serve ${aoi_base[*]} $aoi_extra" S_DRAFT_ON="${draft_on[*]}" \
S_DRAFT_OFF="${draft_off[*]}" S_LLAMA_ARGS="${llama_base[*]} $llama_extra" S_LLAMA_SPEC=$llama_spec \
S_LLAMA_VERSION=$llama_version S_LOAD=$(cut -d' ' -f1 /proc/loadavg 2>/dev/null || echo "") \
python3 - "$out/settings.json" <<PY
import json, os, sys
e = os.environ
json.dump({"preset": e["S_PRESET"], "commit": e["S_COMMIT"], "command": e["S_COMMAND"], "model": e["S_MODEL"],
           "copy_model": e["S_COPY_MODEL"], "copy_note": e["S_COPY_NOTE"], "settings": e["S_SETTINGS"],
           "threads": $threads, "slots": $slots, "cells_per_slot": $cells, "clients": $clients, "repeats": $runs,
           "turns": $turns, "multiturn_max_tokens": $mt_tokens, "shared_max_tokens": $sh_tokens,
           "shared_system_words": $sh_words, "shared_rounds": $rounds, "copy_lines": $cp_lines,
           "copy_max_tokens": $cp_tokens, "copy_requests_alone": $cp_alone, "copy_requests_each": $cp_each,
           "response_cache_max_tokens": $rc_tokens, "aoi_args": e["S_AOI_ARGS"].strip(),
           "aoi_draft_on": e["S_DRAFT_ON"], "aoi_draft_off": e["S_DRAFT_OFF"],
           "aoi_has": {"--draft-max": $(has_json --draft-max), "--prefix-cache-cells": $(has_json --prefix-cache-cells),
                       "--response-cache": $(has_json --response-cache)},
           "llama_args": e["S_LLAMA_ARGS"].strip(), "llama_spec": e["S_LLAMA_SPEC"],
           "llama_version": e["S_LLAMA_VERSION"], "llama": bool($llama), "load_start": e["S_LOAD"]},
          open(sys.argv[1], "w"), indent=1)
PY

echo "== stateless benchmark: $command"
echo "== preset $preset: $model (copy scenario: $copy_model), output in $out"
echo "== engine settings, both servers: $settings; $slots slots of $cells cells"
echo "== aoi serve ${aoi_base[*]} ${aoi_extra} (drafting on: ${draft_on[*]:-its default}; off: ${draft_off[*]:-n/a})"
echo "== llama-server ${llama_base[*]} ${llama_extra} (--cache-ram at its default; drafting on: $llama_spec)"
echo "== $llama_version"

# The servers start in this shell (bench/lib.sh); each start sets $url. Arguments: log name, then the flags.
start_aoi() {
  local name=$1; shift
  local port; port=$(free_port)
  build/tools/aoi serve "$@" --port "$port" >"$out/$name.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:$port" "$out/$name.log"
  url="http://127.0.0.1:$port"
}
start_llama() {
  local name=$1; shift
  local port; port=$(free_port)
  build/bin/llama-server "$@" --port "$port" >"$out/$name.log" 2>&1 &
  pids+=($!)
  wait_ready "http://127.0.0.1:$port" "$out/$name.log"
  url="http://127.0.0.1:$port"
}
client() {  # scenario system config-name url [client flags]
  local scenario=$1 system=$2 config=$3 u=$4; shift 4
  python3 bench/stateless/stateless_bench.py "$scenario" --url "$u" --system "$system" --config "$config" \
    --repeats "$runs" --out "$out/results/$scenario-$system${config:+-$config}.json" "$@"
}
# One system at a time: start it, run the scenario, stop it.
run_aoi() {  # scenario config [aoi flags] -- [client flags]
  local scenario=$1 config=$2; shift 2
  local flags=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  start_aoi "aoi-$scenario${config:+-$config}" "${flags[@]}" "${aoi_more[@]}"
  client "$scenario" aoi "$config" "$url" "$@"
  stop_servers
}
run_llama() {
  [ "$llama" = 1 ] || return 0
  local scenario=$1 config=$2; shift 2
  local flags=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do flags+=("$1"); shift; done
  shift
  start_llama "llama-server-$scenario${config:+-$config}" "${flags[@]}" "${llama_more[@]}"
  client "$scenario" llama-server "$config" "$url" "$@"
  stop_servers
}

for scenario in ${scenarios//,/ }; do
  echo
  echo "== $scenario"
  case "$scenario" in
    multiturn)
      args=(--turns "$turns" --max-tokens "$mt_tokens")
      run_aoi multiturn "" "${aoi_base[@]}" -- "${args[@]}"
      run_llama multiturn "" -m "$model" "${llama_base[@]}" -- "${args[@]}" ;;
    shared)
      args=(--clients "$clients" --rounds "$rounds" --system-words "$sh_words" --max-tokens "$sh_tokens")
      run_aoi shared "" "${aoi_base[@]}" -- "${args[@]}"
      run_llama shared "" -m "$model" "${llama_base[@]}" -- "${args[@]}" ;;
    copy)
      aoi_copy=("${aoi_base[@]}")
      aoi_copy[1]=$copy_model
      for n in 1 "$clients"; do
        per=$cp_alone; [ "$n" != 1 ] && per=$cp_each
        args=(--clients "$n" --requests "$per" --lines "$cp_lines" --max-tokens "$cp_tokens")
        if [ ${#draft_on[@]} -gt 0 ]; then
          run_aoi copy "x$n-draft" "${aoi_copy[@]}" "${draft_on[@]}" -- "${args[@]}"
        fi
        run_aoi copy "x$n-nodraft" "${aoi_copy[@]}" "${draft_off[@]}" -- "${args[@]}"
        run_llama copy "x$n-draft" -m "$copy_model" "${llama_base[@]}" "${llama_spec_args[@]}" -- "${args[@]}"
        run_llama copy "x$n-nodraft" -m "$copy_model" "${llama_base[@]}" -- "${args[@]}"
      done ;;
    response-cache)
      run_aoi response-cache "" "${aoi_base[@]}" -- --max-tokens "$rc_tokens" ;;
    *) echo "unknown scenario $scenario (multiturn, shared, copy, response-cache)" >&2; exit 2 ;;
  esac
done

echo
# The load average at the end, beside the one at the start: timings on a machine doing other work mean little.
cut -d' ' -f1 /proc/loadavg >"$out/load_end" 2>/dev/null || true
python3 bench/stateless/report.py "$out" | tee "$out/summary.md"
echo "== done: $out (summary: $out/summary.md)"
