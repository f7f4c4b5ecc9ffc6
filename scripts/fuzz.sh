#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz) with Clang in build-fuzz and runs each for a while, as many at a
# time as there are jobs (AOI_JOBS), each on one core.
#   scripts/fuzz.sh [--seconds N | --runs N] [--out FILE.md] [target...]     default: 60 seconds each, every target
# --out writes the summary as a markdown table, headed by the commit and this command as typed (the environment
# variables below that change what runs included), for docs/benchmarks.md: bench/update_docs.py fuzz FILE.
# Targets: fuzz_records_body fuzz_request_json fuzz_record_template fuzz_record_decoder fuzz_record_renderer
# fuzz_http_request.
# Environment:
#   AOI_FUZZ_DIR    the build directory (default build-fuzz)
#   AOI_FUZZ_MODEL  the model fuzz_record_renderer tokenizes with (default build/models/test-micro.gguf, which the
#                   release build's tests generate)
#   AOI_JOBS        compile jobs and targets fuzzed at once (default: the number of cores)
# New corpus entries stay in $AOI_FUZZ_DIR/fuzz/corpus/<target>/ (the seeds in tests/fuzz/corpus/ are only read);
# an input that breaks a target is saved in $AOI_FUZZ_DIR/fuzz/artifacts/<target>/: fix the bug and add the input
# to tests/fuzz/regressions/<target>/ (ctest -L fuzz replays both folders). Logs: $AOI_FUZZ_DIR/fuzz/logs/.
# Exit status: 0 when no target found anything.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
all_targets=(fuzz_records_body fuzz_request_json fuzz_record_template fuzz_record_decoder fuzz_record_renderer
             fuzz_http_request)

usage() { sed -n '2,/^set /{/^#/s/^# \{0,1\}//p}' "$0"; }

argv=("$@")
seconds=60
runs=""
out=""
targets=()
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=${2:?--seconds needs a number}; runs=""; shift 2 ;;
    --runs) runs=${2:?--runs needs a number}; shift 2 ;;
    --out) out=${2:?--out needs a file}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    -*) usage >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  case " ${all_targets[*]} " in
    *" $t "*) ;;
    *) echo "fuzz: unknown target $t (one of: ${all_targets[*]})" >&2; exit 2 ;;
  esac
done

# What the table names: this command as typed, with the environment it reads that changes what runs, and the
# commit, taken before the build (bench/benchlib.py: `abc1234+changes` from a checkout with changes, which
# bench/update_docs.py refuses).
env_shown=()
for v in AOI_JOBS AOI_FUZZ_MODEL; do
  if [ -n "${!v:-}" ]; then env_shown+=("$v=${!v}"); fi
done
cmdline=$(python3 "$root/bench/benchlib.py" command "${env_shown[@]}" scripts/fuzz.sh "${argv[@]}")
commit=$(python3 "$root/bench/benchlib.py" commit)

if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ not found (scripts/setup.sh --tests installs clang and its libFuzzer runtime)" >&2
  exit 1
fi
dir=${AOI_FUZZ_DIR:-$root/build-fuzz}
model=${AOI_FUZZ_MODEL:-$root/build/models/test-micro.gguf}
jobs=${AOI_JOBS:-$(nproc)}
launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
CC=clang CXX=clang++ cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Release -DAOI_WERROR=ON -DAOI_FUZZ=ON \
  -DAOI_BUILD_BENCH=OFF -DAOI_BUILD_TESTS=OFF -DAOI_FUZZ_MODEL="$model" "${launcher[@]}" >/dev/null
cmake --build "$dir" -j"$jobs" --target "${targets[@]}"

work=$dir/fuzz
mkdir -p "$work/logs" "$work/results"

# run_target T: fuzzes T on one core and writes its summary line and markdown row to $work/results/T.{txt,md}.
run_target() {
  local t=$1 corpus=$work/corpus/$1 artifacts=$work/artifacts/$1 log=$work/logs/$1.log
  local result=$work/results/$1
  rm -f "$result.txt" "$result.md"
  mkdir -p "$corpus" "$artifacts"
  local args=(-print_final_stats=1 -timeout=60 "-artifact_prefix=$artifacts/")
  if [ -n "$runs" ]; then args+=("-runs=$runs"); else args+=("-max_total_time=$seconds"); fi
  [ -f "$root/tests/fuzz/$t.dict" ] && args+=("-dict=$root/tests/fuzz/$t.dict")
  local seeds=() d
  for d in "$root/tests/fuzz/corpus/$t" "$root/tests/fuzz/regressions/$t"; do [ -d "$d" ] && seeds+=("$d"); done
  local kept=0
  [ -d "$root/tests/fuzz/regressions/$t" ] && kept=$(find "$root/tests/fuzz/regressions/$t" -type f | wc -l)
  if [ "$t" = fuzz_record_renderer ] && [ ! -f "$model" ]; then
    echo "fuzz: $t needs a model: $model is missing (set AOI_FUZZ_MODEL, or generate the test models with" \
      "scripts/test.sh)" >&2
    printf '%-22s %14s %10s %8s %8s  %s\n' "$t" - - - - "FAILED: no model" >"$result.txt"
    echo "| \`$t\` | - | - | - | $kept | FAILED: no model |" >"$result.md"
    return 1
  fi
  local budget="$seconds s"
  [ -n "$runs" ] && budget="$runs runs"
  echo "fuzz: $t ($budget), log $log"
  local start rc=0 outcome
  start=$(date +%s)
  AOI_FUZZ_MODEL=$model "$dir/tests/fuzz/$t" "${args[@]}" "$corpus" "${seeds[@]}" >"$log" 2>&1 || rc=$?
  local elapsed=$(($(date +%s) - start)) executed rate added
  executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  [ -n "$executed" ] || executed=$(grep -oE '^#[0-9]+' "$log" | tail -1 | tr -d '#' || true)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  added=$(sed -n 's/^stat::new_units_added: *//p' "$log" | tail -1)
  if [ "$rc" -eq 0 ]; then
    outcome="nothing found"
  else
    local artifact
    artifact=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | tail -1)
    outcome="FOUND (exit $rc): ${artifact:-see $log}"
    grep -m1 -E 'invariant broken|ERROR: (AddressSanitizer|libFuzzer)|runtime error' "$log" >&2 || true
  fi
  printf '%-22s %14s %10s %8s %8s  %s\n' "$t" "${executed:-?}" "${rate:-?}" "${added:-?}" "${elapsed}s" \
    "$outcome" >"$result.txt"
  echo "| \`$t\` | ${executed:-?} | ${rate:-?} | ${elapsed} | $kept | $outcome |" >"$result.md"
  [ "$rc" -eq 0 ]
}

# As many targets at a time as there are jobs, each on one core.
status=0
running=0
for t in "${targets[@]}"; do
  if [ "$running" -ge "$jobs" ]; then
    wait -n || status=1
    running=$((running - 1))
  fi
  run_target "$t" &
  running=$((running + 1))
done
while [ "$running" -gt 0 ]; do
  wait -n || status=1
  running=$((running - 1))
done

summary=() markdown=()
for t in "${targets[@]}"; do
  summary+=("$(cat "$work/results/$t.txt")")
  markdown+=("$(cat "$work/results/$t.md")")
done

printf '\n%-22s %14s %10s %8s %8s  %s\n' target executions exec/s new time result
printf '%s\n' "${summary[@]}"
if [ -n "$out" ]; then
  mkdir -p "$(dirname "$out")"
  {
    echo "Measured at commit \`$commit\`: \`$cmdline\`"
    echo
    echo "$(clang++ --version | head -1), -fsanitize=fuzzer,address,undefined, each target on one core," \
      "$((jobs < ${#targets[@]} ? jobs : ${#targets[@]})) at a time."
    echo
    echo "| target | executions | exec/s | seconds | kept | result |"
    echo "|---|---:|---:|---:|---:|---|"
    printf '%s\n' "${markdown[@]}"
  } >"$out"
fi
exit "$status"
