#!/usr/bin/env bash
# shellcheck disable=SC2317  # the checks are functions run through expect, and one runs from a trap
# Tests of what scripts/run.sh is made of, without a build (seconds; CTest runs it as scripts.run_sh):
# - scripts/lib/processes.sh, with stand-ins for the server (stops gracefully, in its own time, on SIGTERM), the
#   feeder (ignores SIGTERM, and so does its child) and the question loop (a function, with a child): two Ctrl-Cs
#   in quick succession (the second during the cleanup), one SIGTERM, and a normal exit leave no process
#   behind, let the server finish its shutdown, and exit 130, 143 and 0;
# - the build as run.sh runs it (scripts/build.sh in a process group of its own, a stand-in cmake on PATH)
#   stopped by a Ctrl-C mid-build;
# - scripts/lib/stages.sh through scripts/build.sh: as CI and scripts/test.sh run it (no AOI_STAGE_LOG) the
#   compiler's output goes where it always went; under run.sh one line per stage, the output in the log, a
#   failing stage's last 40 lines and the log's path with a non-zero exit; AOI_VERBOSE=1 and CI=true show it live.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/run_sh_test.XXXXXX")
failed=0

# Every pid and process group a stand-in records goes to $work/*/pids and groups; whatever a failed test leaves
# is killed on the way out.
leftovers() {
  local f p
  for f in "$work"/*/groups; do
    [ -f "$f" ] || continue
    while read -r p; do kill -KILL -- "-$p" 2>/dev/null || true; done <"$f"
  done
  for f in "$work"/*/pids; do
    [ -f "$f" ] || continue
    while read -r p; do kill -KILL "$p" 2>/dev/null || true; done <"$f"
  done
}
trap 'leftovers; rm -rf "$work"' EXIT

pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; failed=1; section_failed=1; }
section() { echo "== $1"; section_failed=0; }
expect() {  # description command...
  local what=$1
  shift
  if "$@"; then pass "$what"; else fail "$what"; fi
}
contains() { grep -qF -- "$2" "$1"; }
lacks() { ! grep -qF -- "$2" "$1"; }

# Whether a process runs (a zombie does not), read from /proc rather than with the library under test.
running() {
  local stat
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  stat=${stat##*) }
  case "$stat" in Z*|X*) return 1 ;; *) return 0 ;; esac
}
# The processes still running among the pids recorded in $1/pids and in the process groups of $1/groups.
survivors() {
  local dir=$1 p f stat groups=" "
  while read -r p; do running "$p" && echo "$p"; done <"$dir/pids"
  while read -r p; do groups+="$p "; done <"$dir/groups"
  for f in /proc/[0-9]*/stat; do
    read -r stat 2>/dev/null <"$f" || continue
    stat=${stat##*) }
    # shellcheck disable=SC2086  # state ppid pgrp ...
    set -- $stat
    case "$1" in Z|X) continue ;; esac
    case "$groups" in *" $3 "*) f=${f#/proc/}; echo "${f%/stat} (group $3)" ;; esac
  done
  return 0
}
no_survivors() {
  local left
  left=$(survivors "$1")
  [ -z "$left" ] || { echo "     still running: $(echo "$left" | tr '\n' ' ')"; return 1; }
}
wait_for_file() {  # path seconds
  local tenths=$(($2 * 10))
  while [ ! -s "$1" ] && [ "$tenths" -gt 0 ]; do sleep 0.1; tenths=$((tenths - 1)); done
  [ -s "$1" ]
}
# Starts $work/$1.sh in a process group of its own, with SIGINT not ignored (a background job of a shell
# without job control would ignore it), as a terminal runs a command: kill -INT -- -PID is then the Ctrl-C.
start_driver() {  # name -> driver_pid
  local name=$1
  shift
  mkdir -p "$work/$name"
  : >"$work/$name/pids"
  : >"$work/$name/groups"
  set -m
  OUT="$work/$name" ROOT="$root" "$@" bash "$work/$name.sh" >"$work/$name/stdout" 2>"$work/$name/stderr" &
  driver_pid=$!
  set +m
  echo "$driver_pid" >>"$work/$name/pids"
}
# The same, its output (stdout and stderr) read through a pipe by a process of its own (reader_pid), as in
# `scripts/run.sh 2>&1 | tee run.log`, where the terminal's Ctrl-C also ends tee.
start_driver_piped() {  # name -> driver_pid reader_pid
  local name=$1
  shift
  mkdir -p "$work/$name"
  : >"$work/$name/pids"
  : >"$work/$name/groups"
  mkfifo "$work/$name/pipe"
  cat "$work/$name/pipe" >"$work/$name/stdout" &
  reader_pid=$!
  set -m
  OUT="$work/$name" ROOT="$root" "$@" bash "$work/$name.sh" >"$work/$name/pipe" 2>&1 &
  driver_pid=$!
  set +m
  echo "$driver_pid" >>"$work/$name/pids"
  : >"$work/$name/stderr"
}
finish_driver() {  # -> driver_status
  local tenths=300
  while running "$driver_pid" && [ "$tenths" -gt 0 ]; do sleep 0.1; tenths=$((tenths - 1)); done
  if running "$driver_pid"; then
    fail "the script under test still runs 30 s after the signals"
    kill -KILL -- "-$driver_pid" 2>/dev/null || true
  fi
  driver_status=0
  wait "$driver_pid" || driver_status=$?
}
show() {  # name: the driver's output, for a failing test
  echo "     --- stdout:"; sed 's/^/     /' "$work/$1/stdout"
  echo "     --- stderr:"; sed 's/^/     /' "$work/$1/stderr"
}

# --- scripts/lib/processes.sh: the server, the feeder and the question loop as run.sh starts and stops them.
cat >"$work/processes.sh" <<'EOF'
set -euo pipefail
export PROC_NAME="aoi run"
. "$ROOT/scripts/lib/processes.sh"
export OUT
server_pid="" feed_pid="" loop_pid="" watch_pid=""
cleanup() {
  echo "cleanup began" >>"$OUT/events"
  proc_stop "$watch_pid" 2 "aoi watch"
  proc_stop "$loop_pid" 2 "the question loop"
  proc_stop "$feed_pid" 1 "the feed"
  proc_stop "$server_pid" 10 "aoi serve"
  echo "cleanup ended" >>"$OUT/events"
}
proc_traps cleanup

# The server: on SIGTERM it takes 1.5 s to shut down, then says it did.
server() {
  echo "$BASHPID" >>"$OUT/pids"
  trap 'sleep 1.5; echo graceful >"$OUT/server-stopped"; exit 0' TERM
  while :; do sleep 0.2 & wait $! || true; done
}
# The feeder ignores SIGTERM, and so does its child: only SIGKILL, to the whole group, stops them.
feeder() {
  trap '' TERM
  echo "$BASHPID" >>"$OUT/pids"
  sleep 1000 &
  echo $! >>"$OUT/pids"
  wait
}
# The question loop: a function with a child, like run.sh's ask_loop.
loop() {
  trap 'exit 0' TERM
  echo "$BASHPID" >>"$OUT/pids"
  while :; do
    sleep 1000 &
    echo $! >>"$OUT/pids"
    wait $! || true
  done
}
proc_start server >>"$OUT/server.log" 2>&1
server_pid=$PROC_PID
proc_start feeder
feed_pid=$PROC_PID
proc_start loop
loop_pid=$PROC_PID
proc_start sleep "${WATCH_SECONDS:-1000}"
watch_pid=$PROC_PID
printf '%s\n' "$server_pid" "$feed_pid" "$loop_pid" "$watch_pid" >>"$OUT/groups"
printf '%s\n' "$watch_pid" >>"$OUT/pids"
wait_for() { local t=50; while [ "$(wc -l <"$OUT/pids")" -lt "$1" ] && [ $t -gt 0 ]; do sleep 0.1; t=$((t - 1)); done; }
wait_for 7  # the driver, watch, server, feeder and its child, loop and its child
echo ready >"$OUT/ready"
status=0
wait "$watch_pid" || status=$?
exit "$status"
EOF

section "two Ctrl-Cs in quick succession, the second while the cleanup runs"
start_driver processes
if wait_for_file "$work/processes/ready" 10; then
  # The terminal's Ctrl-C goes to the whole foreground process group. (A script that a second Ctrl-C kills is
  # gone by the third.)
  kill -INT -- "-$driver_pid"
  sleep 0.3
  kill -INT -- "-$driver_pid" 2>/dev/null || true
  sleep 0.2
  kill -INT -- "-$driver_pid" 2>/dev/null || true
  finish_driver
  expect "exit status 130 after Ctrl-C (got $driver_status)" [ "$driver_status" = 130 ]
  expect "the cleanup ran to its end" contains "$work/processes/events" "cleanup ended"
  expect "a further Ctrl-C prints \"stopping, please wait\"" \
    contains "$work/processes/stderr" "aoi run: stopping, please wait"
  expect "the server finished its graceful shutdown (SIGTERM, not SIGKILL)" test -s "$work/processes/server-stopped"
  expect "the feeder, which ignores SIGTERM, was killed after its timeout" \
    contains "$work/processes/stderr" "the feed did not stop within 1 s of SIGTERM: killing it"
  expect "no process left: the server, the feeder, the loop, their children" no_survivors "$work/processes"
else
  fail "the stand-ins did not start"
fi
[ "$section_failed" = 0 ] || show processes

section "one SIGTERM"
# The same driver, under another name (its output in its own folder).
cp "$work/processes.sh" "$work/processes-term.sh"
start_driver processes-term
if wait_for_file "$work/processes-term/ready" 10; then
  kill -TERM "$driver_pid" || true
  finish_driver
  expect "exit status 143 after SIGTERM (got $driver_status)" [ "$driver_status" = 143 ]
  expect "the cleanup ran to its end" contains "$work/processes-term/events" "cleanup ended"
  expect "the server finished its graceful shutdown" test -s "$work/processes-term/server-stopped"
  expect "no process left" no_survivors "$work/processes-term"
else
  fail "the stand-ins did not start"
fi
[ "$section_failed" = 0 ] || show processes-term

section "the watched command ends by itself"
cp "$work/processes.sh" "$work/processes-end.sh"
start_driver processes-end env WATCH_SECONDS=2
finish_driver
expect "exit status 0 (got $driver_status)" [ "$driver_status" = 0 ]
expect "the cleanup ran to its end" contains "$work/processes-end/events" "cleanup ended"
expect "no process left" no_survivors "$work/processes-end"
expect "nothing about stopping twice" lacks "$work/processes-end/stderr" "please wait"
[ "$section_failed" = 0 ] || show processes-end

# --- A stand-in cmake: configuring prints a line; building prints make's progress lines with warnings between
# them (STUB_LINES of them, STUB_DELAY seconds apart), then fails with STUB_FAIL if set, or sleeps STUB_HANG s.
mkdir -p "$work/bin"
cat >"$work/bin/cmake" <<'EOF'
#!/usr/bin/env bash
[ -n "${OUT:-}" ] && { echo "$$" >>"$OUT/pids"; }
if [ "$1" != --build ]; then
  echo "-- Configuring done (stand-in cmake)"
  exit 0
fi
n=${STUB_LINES:-50}
for ((i = 1; i <= n; i++)); do
  printf '[%3d%%] Building CXX object llama.cpp/src/unit%d.cpp.o\n' $((i * 100 / n)) "$i"
  echo "llama.cpp/src/unit$i.cpp:1:1: warning: compiler warning $i of $n" >&2
  [ -z "${STUB_DELAY:-}" ] || sleep "$STUB_DELAY"
done
if [ -n "${STUB_HANG:-}" ]; then
  sleep "$STUB_HANG" &
  [ -z "${OUT:-}" ] || echo $! >>"$OUT/pids"
  wait
fi
if [ -n "${STUB_FAIL:-}" ]; then
  echo "llama.cpp/src/last.cpp:9:9: error: the build broke here" >&2
  exit "$STUB_FAIL"
fi
[ -z "${STUB_INSTALL:-}" ] || { mkdir -p "$2/tools" && cp "$STUB_INSTALL"/* "$2/tools/"; }
EOF
chmod +x "$work/bin/cmake"
build() {  # name [VAR=value...]: scripts/build.sh with the stand-in cmake; output in $work/$name/
  local name=$1
  shift
  mkdir -p "$work/$name"
  build_status=0
  # From the checkout, as run.sh runs it (the progress lines name the log relative to it when under it).
  (cd "$root" && env -u AOI_STAGE_LOG -u AOI_VERBOSE -u CI PATH="$work/bin:$PATH" "$@" \
    scripts/build.sh "$work/$name/build") >"$work/$name/stdout" 2>"$work/$name/stderr" || build_status=$?
}

section "scripts/build.sh as scripts/test.sh and CI run it (no AOI_STAGE_LOG): output as cmake prints it"
build plain
expect "exit status 0" [ "$build_status" = 0 ]
expect "the build's output on stdout" contains "$work/plain/stdout" "[100%] Building CXX object"
expect "the compiler's warnings on stderr" contains "$work/plain/stderr" "warning: compiler warning 50 of 50"
expect "no progress lines" lacks "$work/plain/stdout" "building llama.cpp"
expect "configuring prints nothing on stdout (as before)" lacks "$work/plain/stdout" "Configuring done"
build plain-fail STUB_FAIL=3
expect "a failed build exits non-zero (got $build_status)" [ "$build_status" = 3 ]
expect "with every warning shown" contains "$work/plain-fail/stderr" "compiler warning 1 of 50"

section "scripts/build.sh under run.sh (AOI_STAGE_LOG): one line per stage, the output in the log"
build staged AOI_STAGE_LOG="$work/staged/build.log" AOI_STAGE_NAME="aoi run" AOI_STAGE_EVERY=1 \
  STUB_LINES=20 STUB_DELAY=0.15
expect "exit status 0" [ "$build_status" = 0 ]
expect "a line for configuring" contains "$work/staged/stdout" "aoi run: configuring $work/staged/build..."
expect "a line for building, naming the log" \
  grep -qE "^aoi run: building llama.cpp and aoi with [0-9]+ jobs .*\(log: $work/staged/build.log\)" "$work/staged/stdout"
expect "a progress line with the build's percentage" grep -qE "^aoi run:   [0-9]+% after [0-9]+s" "$work/staged/stdout"
expect "and how long each stage took" grep -qE "^aoi run:   done in [0-9]+s" "$work/staged/stdout"
expect "no compiler output on the terminal" lacks "$work/staged/stdout" "warning:"
expect "nothing on stderr" test ! -s "$work/staged/stderr"
expect "the log has the configure output" contains "$work/staged/build.log" "Configuring done"
expect "the log has every warning" contains "$work/staged/build.log" "compiler warning 1 of 20"
expect "the log has the last line" contains "$work/staged/build.log" "[100%] Building CXX object"
[ "$section_failed" = 0 ] || show staged

section "a failing stage: its last 40 lines, the log's path, a non-zero exit"
build staged-fail AOI_STAGE_LOG="$work/staged-fail/build.log" AOI_STAGE_NAME="aoi run" STUB_FAIL=2
expect "exit status 2, the build's (got $build_status)" [ "$build_status" = 2 ]
expect "it says which stage failed" contains "$work/staged-fail/stderr" "aoi run: building llama.cpp and aoi"
expect "with the error" contains "$work/staged-fail/stderr" "error: the build broke here"
expect "and the lines before it" contains "$work/staged-fail/stderr" "compiler warning 50 of 50"
expect "but only the last 40 lines of the output" lacks "$work/staged-fail/stderr" "compiler warning 10 of 50"
expect "and the full log's path" contains "$work/staged-fail/stderr" "aoi run: the full log: $work/staged-fail/build.log"
expect "the log has it all" contains "$work/staged-fail/build.log" "compiler warning 1 of 50"
expect "tail lines: 40 (got $(grep -c '^    ' "$work/staged-fail/stderr"))" \
  [ "$(grep -c '^    ' "$work/staged-fail/stderr")" = 40 ]
[ "$section_failed" = 0 ] || show staged-fail

for how in AOI_VERBOSE=1 CI=true; do
  section "$how: the output live, and in the log"
  build "verbose-${how%%=*}" AOI_STAGE_LOG="$work/verbose-${how%%=*}/build.log" "$how" STUB_FAIL=4
  out="$work/verbose-${how%%=*}"
  expect "exit status 4 (got $build_status)" [ "$build_status" = 4 ]
  expect "every line shown" contains "$out/stdout" "compiler warning 1 of 50"
  expect "and in the log" contains "$out/build.log" "compiler warning 1 of 50"
  expect "the failure names the log" contains "$out/stderr" "the full log: $out/build.log"
done

# --- The build as run.sh runs it: scripts/build.sh started with proc_start, waited for, stopped by the cleanup.
cat >"$work/build-stop.sh" <<'EOF'
set -euo pipefail
export PROC_NAME="aoi run"
. "$ROOT/scripts/lib/processes.sh"
build_pid=""
cleanup() { proc_stop "$build_pid" 10 "the build"; echo "cleanup ended" >>"$OUT/events"; }
proc_traps cleanup
export AOI_STAGE_LOG=$OUT/build.log STUB_HANG=1000
proc_start "$ROOT/scripts/build.sh" "$OUT/build"
build_pid=$PROC_PID
echo "$build_pid" >>"$OUT/groups"
echo ready >"$OUT/ready"
wait "$build_pid"
EOF
section "Ctrl-C during the build"
start_driver build-stop env PATH="$work/bin:$PATH"
if wait_for_file "$work/build-stop/ready" 10 && wait_for_file "$work/build-stop/build.log" 10; then
  sleep 0.5
  kill -INT -- "-$driver_pid" || true
  finish_driver
  expect "exit status 130 (got $driver_status)" [ "$driver_status" = 130 ]
  expect "the cleanup ran to its end" contains "$work/build-stop/events" "cleanup ended"
  expect "no process of the build left" no_survivors "$work/build-stop"
else
  fail "the build did not start"
fi
[ "$section_failed" = 0 ] || show build-stop

# --- scripts/run.sh itself, end to end, in a copy of scripts/ with stand-ins: scripts/setup.sh, cmake (on PATH)
# and the program the build makes (build/tools/aoi), quick and recording its pid; the committed model is a stand-in.
tree=$work/tree
mkdir -p "$tree/models" "$work/programs"
cp -R "$root/scripts" "$tree/"
: >"$tree/models/analyst.gguf"
printf '#!/usr/bin/env bash\necho "setup: nothing to install (stand-in)"\n' >"$tree/scripts/setup.sh"
cat >"$work/programs/aoi" <<'EOF'
#!/usr/bin/env bash
# build/tools/aoi as scripts/run.sh uses it. The server takes a second to stop on SIGTERM; the feed and the
# event stream print until stopped; push reads its named pipe to the end.
[ -z "${OUT:-}" ] || echo "$$" >>"$OUT/pids"
cmd=$1
shift
case "$cmd" in
  serve)
    trap 'sleep 1; echo graceful >"$OUT/server-stopped"; exit 0' TERM
    echo "aoi: listening on http://127.0.0.1:8080"
    while :; do sleep 0.2 & wait $! || true; done ;;
  sessions) ;;
  create) echo "aoi create $1 (stand-in)" ;;
  push) while [ "$1" != --file ]; do shift; done; cat "$2" >/dev/null ;;
  feed)
    [ "${2:-}" != --instructions ] || { echo "You are a market analyst (stand-in)."; exit 0; }
    while :; do echo '{"t": "2030-01-01 09:00"}'; sleep 0.2; done ;;
  ask) echo "answer" ;;
  watch) while :; do echo "event data_updated"; echo watching >"$OUT/ready"; sleep 0.2; done ;;
  *) echo "aoi (stand-in): $cmd?" >&2; exit 2 ;;
esac
EOF
chmod +x "$work/programs/aoi"
# shellcheck disable=SC2016  # $TREE is the driver's
printf 'cd "$TREE"\nexec scripts/run.sh\n' >"$work/run-sh.sh"
cp "$work/run-sh.sh" "$work/run-sh-fail.sh"

section "scripts/run.sh (stand-ins for setup, cmake and aoi): two Ctrl-Cs while it streams"
start_driver run-sh env -u AOI_VERBOSE -u CI TREE="$tree" PATH="$work/bin:$PATH" STUB_INSTALL="$work/programs" \
  STUB_LINES=10
if wait_for_file "$work/run-sh/ready" 20; then
  kill -INT -- "-$driver_pid"
  # The second Ctrl-C once the cleanup has begun (it prints "aoi run: stopping" and then takes the stand-in
  # server's second to stop): on a loaded machine a fixed pause can end before the first one is handled.
  for _ in $(seq 1 100); do
    grep -q "aoi run: stopping" "$work/run-sh/stdout" 2>/dev/null && break
    sleep 0.1
  done
  kill -INT -- "-$driver_pid" 2>/dev/null || true
  finish_driver
  out=$work/run-sh/stdout
  expect "exit status 130 (got $driver_status)" [ "$driver_status" = 130 ]
  expect "a line per stage: installing" contains "$out" "aoi run: installing what is missing"
  expect "configuring" contains "$out" "aoi run: configuring build... (log: build/aoi-build.log)"
  expect "building" contains "$out" "aoi run: building llama.cpp and aoi"
  expect "the analyst model by default" contains "$out" "aoi serve -m models/analyst.gguf"
  expect "starting the server" contains "$out" "aoi run: starting the server"
  expect "no compiler output on the terminal" lacks "$out" "warning:"
  expect "the build's output in build/aoi-build.log" contains "$tree/build/aoi-build.log" "compiler warning 10 of 10"
  expect "the events were shown" contains "$out" "event data_updated"
  expect "the cleanup ran to its end" contains "$out" "aoi run: stopped (server log: $tree/build/aoi-serve.log)"
  expect "the second Ctrl-C only printed" contains "$work/run-sh/stderr" "aoi run: stopping, please wait"
  expect "the server finished its graceful shutdown" test -s "$work/run-sh/server-stopped"
  expect "no process left: the server, the feed, push, watch, the question loop" no_survivors "$work/run-sh"
else
  fail "scripts/run.sh did not get to streaming"
fi
[ "$section_failed" = 0 ] || { show run-sh; tail -n 20 "$tree/build/aoi-build.log" 2>/dev/null | sed 's/^/     log: /'; }

section "scripts/run.sh | tee: Ctrl-C ends the reader too, and the cleanup must not die writing to it (SIGPIPE)"
cp "$work/run-sh.sh" "$work/run-sh-pipe.sh"
rm -rf "$tree/build"
start_driver_piped run-sh-pipe env -u AOI_VERBOSE -u CI TREE="$tree" PATH="$work/bin:$PATH" \
  STUB_INSTALL="$work/programs" STUB_LINES=10
if wait_for_file "$work/run-sh-pipe/ready" 20; then
  kill -TERM "$reader_pid"  # (a background job here, it ignores SIGINT)
  wait "$reader_pid" 2>/dev/null || true
  kill -INT -- "-$driver_pid"
  finish_driver
  expect "exit status 130 (got $driver_status)" [ "$driver_status" = 130 ]
  expect "the server finished its graceful shutdown" test -s "$work/run-sh-pipe/server-stopped"
  expect "no process left" no_survivors "$work/run-sh-pipe"
else
  fail "scripts/run.sh did not get to streaming"
fi
[ "$section_failed" = 0 ] || show run-sh-pipe

section "scripts/run.sh: a failing stage stops it with the stage's last lines and the log's path"
printf '#!/usr/bin/env bash\necho "E: Unable to locate package cmake (stand-in)" >&2\nexit 100\n' \
  >"$tree/scripts/setup.sh"
rm -rf "$tree/build"
start_driver run-sh-fail env -u AOI_VERBOSE -u CI TREE="$tree" PATH="$work/bin:$PATH"
finish_driver
expect "exit status 100, setup's (got $driver_status)" [ "$driver_status" = 100 ]
expect "it names the stage" contains "$work/run-sh-fail/stderr" "aoi run: installing what is missing"
expect "with its output" contains "$work/run-sh-fail/stderr" "    E: Unable to locate package cmake (stand-in)"
expect "and the log's path" contains "$work/run-sh-fail/stderr" "aoi run: the full log: $tree/build/aoi-build.log"
expect "nothing was built" test ! -e "$tree/build/tools"
[ "$section_failed" = 0 ] || show run-sh-fail

section "scripts/run.sh --help"
"$root/scripts/run.sh" --help >"$work/help" 2>&1 || fail "run.sh --help failed"
expect "documents -v / AOI_VERBOSE" contains "$work/help" "AOI_VERBOSE=1"
expect "names the build log" contains "$work/help" "build/aoi-build.log"

if [ "$failed" = 0 ]; then
  echo "all passed"
else
  echo "FAILED"
fi
exit "$failed"
