#!/usr/bin/env bash
# The main job: install, build, start `aoi serve`, and stream a live synthetic OHLCV feed into a session while
# its events print as they happen (data_updated as bars are ingested, flash_ready as the flash answers follow
# the data) and a question is asked every few seconds. Ctrl-C stops everything.
#   scripts/run.sh [--model PATH] [--port PORT] [other aoi serve options, e.g. --threads 2]
# Without --model, models/analyst.gguf answers: a small model trained on this kind of stream (models/analyst.md).
# Installing and building print one line per stage; their output goes to
# build/aoi-build.log (its last 40 lines are shown if a stage fails). -v, --verbose or AOI_VERBOSE=1 shows it live.
# AOI_RUN_NO_BUILD=1 skips the install and build steps (for a tree that is built already).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
export PROC_NAME="aoi run" AOI_STAGE_NAME="aoi run"
# shellcheck source-path=SCRIPTDIR source=lib/processes.sh
. "$root/scripts/lib/processes.sh"
# shellcheck source-path=SCRIPTDIR source=lib/stages.sh
. "$root/scripts/lib/stages.sh"

model=""
port=8080
host=127.0.0.1
serve_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model|-m) model=${2:?"$1 needs a path"}; shift 2 ;;
    --model=*) model=${1#*=}; shift ;;
    --port) port=${2:?"--port needs a number"}; shift 2 ;;
    --port=*) port=${1#*=}; shift ;;
    --host) host=${2:?"--host needs an address"}; serve_args+=("$1" "$2"); shift 2 ;;
    --api-key) export AOI_API_KEY=${2:?"--api-key needs a key"}; serve_args+=("$1" "$2"); shift 2 ;;
    -v|--verbose) AOI_VERBOSE=1; shift ;;
    -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) serve_args+=("$1"); shift ;;
  esac
done
case "$model" in ""|/*) ;; *) model=$PWD/$model ;; esac  # relative to where the script was started
cd "$root"

session=demo
# The analyst model's prompt, exactly as it was trained: the system text comes from the built binary (`aoi feed
# ohlcv --instructions`, src/workload/questions.cpp), the question texts are the benchmark's, and the template
# renders the feed's JSON as the benchmark's bar lines. Its window is about 50 bars (30 tokens each).
template='{t},O={o},H={h},L={l},C={c},V={v}'
window_tokens=1500
flash1="Is the trend UP or DOWN?"
flash2="What was the last close?"
question="Is the price consolidating? YES or NO."
ask_every=10
case "$host" in
  0.0.0.0|::) server=http://127.0.0.1:$port ;;  # listening everywhere: talk to it over loopback
  *:*) server=http://[$host]:$port ;;
  *) server=http://$host:$port ;;
esac
export AOI_SERVER=$server

build_log=build/aoi-build.log
export AOI_STAGE_LOG=$root/$build_log AOI_VERBOSE=${AOI_VERBOSE:-0}
if [ "$AOI_VERBOSE" = 1 ]; then
  build_output="shown as it runs and kept in $build_log"
else
  build_output="kept in $build_log (scripts/run.sh -v shows it live)"
fi
cat <<EOF
aoi run: the main job
  1. install and build (scripts/setup.sh, scripts/build.sh build): one line per stage, their output
     $build_output
  2. start aoi serve on $server with ${model:-models/analyst.gguf, a small model trained on such streams}
  3. create session "$session": a market-analyst system prompt, the record template "$template",
     a retention window of $window_tokens data tokens, and two flash questions that are re-answered after
     every data update: "$flash1" and "$flash2"
  4. stream synthetic OHLCV bars into it, 2 a second (aoi feed ohlcv --json --rate 2 | aoi push $session --ndjson)
  5. print the session's events (aoi watch $session) and ask "$question" every ${ask_every} s (aoi ask)
  6. show it all live in the dashboard at $server/ (open it in a browser)
Ctrl-C stops everything.

EOF

aoi=build/tools/aoi
log=build/aoi-serve.log
push_log=build/aoi-push.log
tmp=""
server_started=0
build_pid="" server_pid="" feed_pid="" push_pid="" ask_pid="" watch_pid=""

# Runs once, on any exit: stops what this script started, each in its process group (scripts/lib/processes.sh:
# SIGTERM, then SIGKILL if it is not gone in time), the display first and the server last. A second Ctrl-C
# while it runs only prints "stopping, please wait"; after a signal the script exits 130 (SIGINT), 143 (SIGTERM),
# 129 (SIGHUP) or 141 (SIGPIPE: the reader of its output is gone).
# shellcheck disable=SC2317  # run by the EXIT trap
cleanup() {
  if [ ${#PROC_PIDS[@]} -gt 0 ]; then
    echo
    echo "aoi run: stopping"
    proc_stop "$build_pid" 10 "the build"
    proc_stop "$watch_pid" 2 "aoi watch"
    proc_stop "$ask_pid" 2 "the question loop"
    proc_stop "$feed_pid" 2 "the feed (aoi feed)"
    # The feed's end lets push send its last batch and exit by itself.
    [ -z "$push_pid" ] || proc_wait_exit "$push_pid" 3
    proc_stop "$push_pid" 2 "aoi push"
    proc_stop "$server_pid" 20 "aoi serve"
    proc_stop_all 5
    if [ "$server_started" = 1 ]; then
      echo "aoi run: stopped (server log: $root/$log)"
    else
      echo "aoi run: stopped"
    fi
  fi
  [ -z "$tmp" ] || rm -rf "$tmp"
}
proc_traps cleanup

mkdir -p build
: >"$AOI_STAGE_LOG"
if [ "${AOI_RUN_NO_BUILD:-0}" = 0 ]; then
  stage_run "installing what is missing (Debian packages, llama.cpp's pinned source)" \
    scripts/setup.sh
  # scripts/build.sh prints its own stage lines (AOI_STAGE_LOG). It runs in a process group of its own that the
  # cleanup stops, so that a SIGTERM stops the build as promptly as a Ctrl-C.
  proc_start scripts/build.sh build
  build_pid=$PROC_PID
  status=0
  wait "$build_pid" || status=$?
  proc_stop "$build_pid" 0  # gone already: forgets it
  build_pid=""
  [ "$status" = 0 ] || exit "$status"  # scripts/build.sh said what failed
fi

if [ -z "$model" ]; then
  model=models/analyst.gguf
  custom_model=0
else
  custom_model=1
fi
[ -f "$model" ] || { echo "aoi run: no model at $model" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/aoi-run.XXXXXX")
system=$("$aoi" feed ohlcv --instructions)

echo "aoi run: starting the server: aoi serve -m $model --port $port${serve_args[*]:+ ${serve_args[*]}} (log: $root/$log)"
: >"$log"  # before the server starts, so that the wait below cannot read a previous run's log
# In a session of its own (as everything started here): the terminal's Ctrl-C does not stop it before push has
# sent its last batch; the cleanup does, last.
proc_start "$aoi" serve -m "$model" --port "$port" "${serve_args[@]}" >"$log" 2>&1
server_pid=$PROC_PID
server_started=1
until grep -q "^aoi: listening on" "$log" 2>/dev/null; do
  if ! proc_alive "$server_pid"; then
    status=0
    wait "$server_pid" || status=$?
    proc_stop "$server_pid" 0
    server_pid=""
    {
      echo "aoi run: the server did not start (exit status $status); the last 40 lines of its log:"
      tail -n 40 "$log" | sed 's/^/    /'
      echo "aoi run: the full log: $root/$log"
    } >&2
    exit 1
  fi
  sleep 0.2
done
grep "^aoi: " "$log" | grep -v "loading" || true

# Sessions live in the server's data directory (default ~/.local/state/aoi): after a restart, even a kill -9,
# the session is back with its data and flash answers, and this feed continues it.
skip=0
if "$aoi" sessions 2>/dev/null | awk '{print $1}' | grep -qx "$session"; then
  skip=$(curl -sf ${AOI_API_KEY:+-H "Authorization: Bearer $AOI_API_KEY"} "$server/v1/sessions/$session" |
         python3 -c 'import json, sys; print(json.load(sys.stdin)["last_seq_pushed"])') || skip=0
  echo "aoi run: session $session is back from the data directory with $skip bars; the feed continues after them"
else
  "$aoi" create "$session" --system "$system" --template "$template" --max-tokens "$window_tokens" \
    --flash "$flash1" --flash "$flash2"
fi

# The feed goes through a named pipe rather than `feed | push`, so that each has its own process group to stop:
# the feed first, then push once it has sent its last batch.
# shellcheck disable=SC2317  # run by proc_start
push_records() {  # aoi session fifo push_log
  "$1" push "$2" --ndjson --file "$3" --flush-ms 250 2>"$4" ||
    { echo "aoi run: aoi push stopped:"; tail -n 1 "$4"; } >&2
}
fifo=$tmp/bars
mkfifo "$fifo"
proc_start push_records "$aoi" "$session" "$fifo" "$push_log"
push_pid=$PROC_PID
proc_start "$aoi" feed ohlcv --json --rate 2 --skip "$skip" >"$fifo"
feed_pid=$PROC_PID

# Asks every few seconds; the answer is shown on one line (newlines as \n) between the events.
# shellcheck disable=SC2317  # run by proc_start
ask_loop() {  # aoi session question seconds tmp
  local aoi=$1 session=$2 question=$3 every=$4 tmp=$5 child="" answer
  trap '[ -n "$child" ] && kill "$child" 2>/dev/null; exit 0' TERM
  while :; do
    sleep "$every" &
    child=$!
    wait "$child"
    "$aoi" ask "$session" "$question" --max-tokens 16 >"$tmp/answer" 2>"$tmp/details" &
    child=$!
    wait "$child" || true
    answer=$(cat "$tmp/answer"; printf x)
    answer=${answer%x}
    answer=${answer%$'\n'}
    echo "--- aoi ask $session \"$question\""
    echo "    answer: \"${answer//$'\n'/\\n}\""
    sed 's/^/    /' "$tmp/details"
  done
}
proc_start ask_loop "$aoi" "$session" "$question" "$ask_every" "$tmp"
ask_pid=$PROC_PID

echo
echo "aoi run: the dashboard is at $server/ (open it in a browser${AOI_API_KEY:+; it asks for the API key once})"
cat <<EOF

aoi run: streaming. From another terminal, try:
  curl -s $server/v1/sessions/$session
  curl -s $server/v1/sessions/$session/query -H 'content-type: application/json' \\
       -d '{"question": "$flash1", "max_tokens": 8}'   # path: flash
  curl -sN $server/v1/sessions/$session/events
  curl -s $server/v1/sessions/$session/data -H 'content-type: application/json' \\
       -d '{"records": [{"t": "2030-01-01 09:00", "o": 100, "h": 101.5, "l": 99.5, "c": 101, "v": 12000}]}'
  build/tools/aoi sessions
  build/tools/aoi ask $session "$flash2" --stream
EOF
if [ -n "${AOI_API_KEY:-}" ]; then
  echo "  (with an API key: curl -H 'Authorization: Bearer KEY', and export AOI_API_KEY=KEY for aoi)"
fi
if [ "$custom_model" = 0 ]; then
  echo
  echo "Note: models/analyst.gguf is a 1.3M-parameter model trained for these questions about such bars (its"
  echo "accuracy per question: models/analyst.md); other questions get guesses. The flow and latency are the point."
fi
echo
echo "aoi run: events of session $session (aoi watch $session):"
# In the background like the rest, and waited for: a SIGTERM (not only the terminal's Ctrl-C) stops the script
# at once, where a command in the foreground would hold its trap until the command ended.
proc_start "$aoi" watch "$session" --from 1
watch_pid=$PROC_PID
status=0
wait "$watch_pid" || status=$?
exit "$status"
