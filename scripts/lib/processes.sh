# shellcheck shell=bash
# Starting and stopping the processes a script runs in the background (sourced by scripts/run.sh;
# tests/scripts/run_sh_test.sh checks it with stand-ins).
#
#   proc_traps CLEANUP          on exit, and on SIGINT, SIGTERM, SIGHUP or SIGPIPE (exit status 130, 143, 129,
#                               141), run the function CLEANUP once; a further signal while it runs only prints
#                               "$PROC_NAME: stopping, please wait" (an impatient second Ctrl-C cannot cut the
#                               cleanup short and leave a server running), and SIGPIPE is ignored (the reader of
#                               `scripts/run.sh | tee LOG` is gone after a Ctrl-C: the cleanup's messages must
#                               not kill it)
#   proc_start CMD [ARG...]     start CMD (a command, or a function of the calling script) in the background, in a
#                               session and process group of its own (setsid): the terminal's Ctrl-C does not reach
#                               it, the cleanup decides when it stops. Sets PROC_PID (also its process group id).
#   proc_stop PID SECONDS [NAME]  SIGTERM to PID's process group, up to SECONDS for all of it to exit, then SIGKILL
#   proc_wait_exit PID SECONDS  wait up to SECONDS for PID's process group to exit by itself
#   proc_stop_all SECONDS       proc_stop every process started here and not stopped yet, newest first
#   proc_alive PID              whether any process of PID's process group is still running (zombies excepted)
#
# A function given to proc_start runs in a new bash (exported with export -f): it takes what it needs as
# arguments or exported variables, and it cannot call the script's other functions.
PROC_NAME=${PROC_NAME:-${0##*/}}
PROC_PIDS=()
PROC_PID=""
_proc_cleanup=""
_proc_exiting=0

proc_traps() {
  _proc_cleanup=$1
  trap '_proc_signal 130' INT
  trap '_proc_signal 143' TERM
  trap '_proc_signal 129' HUP
  trap '_proc_signal 141' PIPE
  trap '_proc_exit' EXIT
}

# The first signal: from here on, further signals only print; the exit runs the cleanup (the EXIT trap).
_proc_signal() {
  trap '' PIPE
  trap '_proc_again' INT TERM HUP
  [ "$_proc_exiting" = 1 ] && { _proc_again; return 0; }  # the exit's cleanup has begun: let it finish
  exit "$1"
}

_proc_again() {
  echo "$PROC_NAME: stopping, please wait" >&2 2>/dev/null || true  # a write error (a closed pipe) unreported
}

_proc_exit() {
  local status=$?
  _proc_exiting=1
  trap '' PIPE
  trap '_proc_again' INT TERM HUP
  trap - EXIT
  set +e
  [ -z "$_proc_cleanup" ] || "$_proc_cleanup"
  proc_stop_all 5  # whatever the cleanup left
  exit "$status"
}

proc_start() {
  if declare -F "$1" >/dev/null; then
    # shellcheck disable=SC2163  # exports the function named by $1
    export -f "$1"
    setsid bash -c '"$@"' "$1" "$@" &
  else
    setsid "$@" &
  fi
  # A background command of a shell without job control is never a process group leader, so setsid runs it
  # in a new session without forking: its pid is its process group id.
  PROC_PID=$!
  PROC_PIDS+=("$PROC_PID")
}

# Processes of process group $1 that are not zombies (a zombie is gone, whether or not its parent has reaped
# it: a container's init may never do so). Without /proc, any process of the group counts.
_proc_members() {
  local f stat
  if [ ! -r /proc/self/stat ]; then
    kill -0 -- "-$1" 2>/dev/null && echo "$1"
    return 0
  fi
  for f in /proc/[0-9]*/stat; do
    read -r stat 2>/dev/null <"$f" || continue
    # After the command name, which may hold spaces and parentheses: state ppid pgrp ...
    # shellcheck disable=SC2086  # split on purpose: the fields are letters and numbers
    set -- "$1" ${stat##*) }
    [ "$4" = "$1" ] && [ "$2" != Z ] && [ "$2" != X ] && { f=${f#/proc/}; echo "${f%/stat}"; }
  done
  return 0
}

_proc_not_zombie() {
  local stat
  [ -r "/proc/$1/stat" ] || return 0
  read -r stat 2>/dev/null <"/proc/$1/stat" || return 1
  case "${stat##*) }" in Z*|X*) return 1 ;; *) return 0 ;; esac
}

proc_alive() {
  [ -n "$1" ] || return 1
  if kill -0 -- "-$1" 2>/dev/null && [ -n "$(_proc_members "$1")" ]; then
    return 0
  fi
  # No live process in the group: the pid itself, in case it leads no group.
  kill -0 "$1" 2>/dev/null && _proc_not_zombie "$1"
}

proc_wait_exit() {  # pid seconds
  local pid=$1 tenths=$(($2 * 10))
  while [ "$tenths" -gt 0 ] && proc_alive "$pid"; do
    sleep 0.1
    tenths=$((tenths - 1))
  done
  ! proc_alive "$pid"
}

_proc_forget() {
  local p kept=()
  for p in "${PROC_PIDS[@]}"; do
    [ "$p" = "$1" ] || kept+=("$p")
  done
  PROC_PIDS=("${kept[@]}")
}

_proc_signal_group() {  # signal pid
  kill "-$1" -- "-$2" 2>/dev/null || kill "-$1" "$2" 2>/dev/null || true
}

proc_stop() {  # pid seconds [name]
  local pid=$1 seconds=$2 name=${3:-process $1}
  [ -n "$pid" ] || return 0
  if proc_alive "$pid"; then
    _proc_signal_group TERM "$pid"
    _proc_signal_group CONT "$pid"  # a stopped process acts on SIGTERM once continued
    if ! proc_wait_exit "$pid" "$seconds"; then
      echo "$PROC_NAME: $name did not stop within $seconds s of SIGTERM: killing it" >&2
      _proc_signal_group KILL "$pid"
      proc_wait_exit "$pid" 5 || echo "$PROC_NAME: $name (process group $pid) is still there after SIGKILL" >&2
    fi
  fi
  wait "$pid" 2>/dev/null
  _proc_forget "$pid"
  return 0
}

proc_stop_all() {  # seconds
  local i
  for ((i = ${#PROC_PIDS[@]} - 1; i >= 0; i--)); do
    proc_stop "${PROC_PIDS[i]}" "$1"
  done
}
