#!/usr/bin/env bash
# The analyst model's accuracy through aoi in one command (prints, never asserts): held-out streams at the demo's
# window (50 bars, about 1,500 tokens: scripts/run.sh) and at the streaming benchmark's cpu preset window (100
# bars), each question type asked of a stateful and a naive session, beside trivial answers.
#
#   bench/analyst/run.sh [--preset quick|cpu] [--model PATH] [--threads N] [--out DIR] [--skip-build]
#
#   quick  10 streams per window (a few minutes)
#   cpu    50 streams per window (about 15 minutes on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
command=$(bench_command bench/analyst/run.sh "$@")
commit=$(bench_commit)

preset=cpu model=models/analyst.gguf threads=$(nproc) out="" skip_build=0
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
  quick) streams=10 ;;
  cpu) streams=50 ;;
  *) echo "presets: quick, cpu" >&2; exit 2 ;;
esac
out=${out:-bench-out/analyst-$preset}

if [ "$skip_build" = 0 ]; then
  bench_build aoi-bench-analyst
fi
bench_model "$model"
rm -rf "$out"
mkdir -p "$out"

# Sessions of up to 100 bars (about 3,000 tokens) and their questions; a stateful and a naive session at once.
# The KV cache as aoi serve's default, which the demo runs (keys Q8_0 where the heads allow it, values F16).
settings="model $(basename "$model"), $threads threads, context 16384 for 2 sessions, KV cache K q8_0 V f16, CPU"
port=$(free_port)
build/tools/aoi serve -m "$model" --port "$port" --threads "$threads" --ctx-per-session 8192 --max-sessions 2 \
  --pool-slots 1 --spare-seqs 1 --memory-only --cache-type-k q8_0 --cache-type-v f16 >"$out/aoi.log" 2>&1 &
pids+=($!)
url="http://127.0.0.1:$port"
wait_ready "$url" "$out/aoi.log"

{
  echo "# The analyst model's accuracy through aoi"
  echo
  echo "Measured at commit \`$commit\`: \`$command\`"
  build/bench/aoi-bench-analyst --aoi "$url" --streams "$streams" --windows 50,100 --settings "$settings" --out "$out"
} | tee "$out/summary.md"
