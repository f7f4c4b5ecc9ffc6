#!/usr/bin/env bash
# The main job: install, build, start `aoi serve`, and stream a live synthetic OHLCV feed into a session while
# its events print as they happen (data_updated as bars are ingested, flash_ready as the flash answers follow
# the data) and a question is asked every few seconds. Ctrl-C stops everything.
#   scripts/run.sh [--model PATH] [--port PORT] [other aoi serve options, e.g. --threads 2]
# Without --model, a random-weight SmolLM2-135M-shaped model is generated (its answers are gibberish).
# AOI_RUN_NO_BUILD=1 skips the install and build steps (for a tree that is built already).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

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
    -h|--help) sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) serve_args+=("$1"); shift ;;
  esac
done
case "$model" in ""|/*) ;; *) model=$PWD/$model ;; esac  # relative to where the script was started
cd "$root"

session=demo
system="You are a market analyst. The lines below are hourly OHLCV bars (time, open, high, low, close, volume) \
for one stock, oldest first; new bars arrive while you work. Answer questions about them briefly."
template='{t} O={o} H={h} L={l} C={c} V={v}'
window_tokens=3000
flash1="Is the trend UP or DOWN? Answer with one word."
flash2="What was the last close price?"
question="What was the highest high of the last five bars?"
ask_every=10
case "$host" in
  0.0.0.0|::) server=http://127.0.0.1:$port ;;  # listening everywhere: talk to it over loopback
  *:*) server=http://[$host]:$port ;;
  *) server=http://$host:$port ;;
esac
export AOI_SERVER=$server

cat <<EOF
aoi run: the main job
  1. install and build (scripts/setup.sh, scripts/build.sh build)
  2. start aoi serve on $server with ${model:-a generated random-weight model}
  3. create session "$session": a market-analyst system prompt, the record template "$template",
     a retention window of $window_tokens data tokens, and two flash questions that are re-answered after
     every data update: "$flash1" and "$flash2"
  4. stream synthetic OHLCV bars into it, 2 a second (aoi feed ohlcv --json --rate 2 | aoi push $session --ndjson)
  5. print the session's events (aoi watch $session) and ask "$question" every ${ask_every} s (aoi ask)
  6. show it all live in the dashboard at $server/ (open it in a browser)
Ctrl-C stops everything.

EOF

if [ "${AOI_RUN_NO_BUILD:-0}" = 0 ]; then
  scripts/setup.sh
  scripts/build.sh build
fi
aoi=build/tools/aoi

generated=0
if [ -z "$model" ]; then
  model=models/smollm2-135m-q8_0.gguf
  generated=1
  if [ ! -f "$model" ]; then
    mkdir -p models
    build/tools/aoi-gen-model --shape smollm2-135m --type q8_0 -o "$model"
  fi
fi
[ -f "$model" ] || { echo "aoi run: no model at $model" >&2; exit 1; }

log=build/aoi-serve.log
push_log=build/aoi-push.log
tmp=$(mktemp -d "${TMPDIR:-/tmp}/aoi-run.XXXXXX")
server_pid="" feed_pid="" push_pid="" ask_pid=""

# Stops what this script started, newest first, the server last: SIGTERM, then SIGKILL if it does not exit.
stop_pid() {  # pid, seconds to wait before SIGKILL
  local pid=$1 tenths=$(($2 * 10))
  [ -n "$pid" ] || return 0
  kill -TERM "$pid" 2>/dev/null || return 0
  while kill -0 "$pid" 2>/dev/null && [ "$tenths" -gt 0 ]; do sleep 0.1; tenths=$((tenths - 1)); done
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
cleanup() {
  trap - EXIT INT TERM HUP
  set +e
  echo
  echo "aoi run: stopping"
  stop_pid "$ask_pid" 2
  stop_pid "$feed_pid" 2
  # The feed's end lets push send its last batch and exit by itself.
  local tenths=30
  while [ -n "$push_pid" ] && kill -0 "$push_pid" 2>/dev/null && [ "$tenths" -gt 0 ]; do
    sleep 0.1
    tenths=$((tenths - 1))
  done
  stop_pid "$push_pid" 2
  stop_pid "$server_pid" 20
  rm -rf "$tmp"
  echo "aoi run: stopped (server log: $root/$log)"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

echo "aoi run: starting aoi serve -m $model --port $port ${serve_args[*]} (log: $root/$log)"
: >"$log"  # before the server starts, so that the wait below cannot read a previous run's log
# In a session of its own, so that the terminal's Ctrl-C does not stop it before push has sent its last batch.
setsid "$aoi" serve -m "$model" --port "$port" "${serve_args[@]}" >"$log" 2>&1 &
server_pid=$!
until grep -q "^aoi: listening on" "$log" 2>/dev/null; do
  if ! kill -0 "$server_pid" 2>/dev/null; then
    wait "$server_pid" || true
    server_pid=""
    echo "aoi run: the server did not start:" >&2
    tail -n 20 "$log" >&2
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

# Background jobs are stopped by cleanup, not by the terminal's SIGINT. Simple commands started with & ignore
# SIGINT already; a background { ...; } or function does not pass that on to what it runs, hence `trap '' INT`.
# The feed goes through a named pipe rather than `feed | push &`, so that each has its own pid to stop.
fifo=$tmp/bars
mkfifo "$fifo"
{
  trap '' INT
  "$aoi" push "$session" --ndjson --file "$fifo" --flush-ms 250 2>"$push_log" ||
    { echo "aoi run: aoi push stopped:"; tail -n 1 "$push_log"; } >&2
} &
push_pid=$!
"$aoi" feed ohlcv --json --rate 2 --skip "$skip" >"$fifo" &
feed_pid=$!

# Asks every few seconds; the answer is shown on one line (newlines as \n) between the events.
ask_loop() {
  local child="" answer
  trap '' INT
  trap '[ -n "$child" ] && kill "$child" 2>/dev/null; exit 0' TERM
  while :; do
    sleep "$ask_every" &
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
ask_loop &
ask_pid=$!

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
if [ "$generated" = 1 ]; then
  echo
  echo "Note: $model has random weights, so its answers are gibberish; the point here is the flow and the"
  echo "latency. For real answers: scripts/run.sh --model PATH with an instruct model (e.g. Llama-3.1-8B-Instruct)."
fi
echo
echo "aoi run: events of session $session (aoi watch $session):"
"$aoi" watch "$session" --from 1
