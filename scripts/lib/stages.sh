# shellcheck shell=bash
# Stages of a long job shown as one progress line each, their full output kept in a log file (sourced by
# scripts/run.sh and scripts/build.sh; tests/scripts/run_sh_test.sh checks it).
#
#   stage_run [--progress] TITLE CMD [ARG...]
#       runs CMD with its output (stdout and stderr) appended to $AOI_STAGE_LOG, after the line
#       "$AOI_STAGE_NAME: TITLE... (log: $AOI_STAGE_LOG)". --progress: while it runs, a line with the elapsed time
#       and the percentage the build prints (make's "[ 45%]", ninja's "[12/345]"), rewritten in place on a
#       terminal, every minute otherwise. When CMD fails: its last 40 lines and the log's path, and stage_run
#       returns CMD's exit status.
#   stage_quiet   whether stage_run keeps the output to the log (AOI_STAGE_LOG set, AOI_VERBOSE not 1)
#
#   AOI_STAGE_LOG    the log file; unset: stage_run runs CMD as it is, its output where it goes
#   AOI_STAGE_NAME   the prefix of the progress lines (default: the script's name)
#   AOI_VERBOSE=1    CMD's output is shown live as well as kept in the log (CI=true sets it, unless it is set)
#   AOI_STAGE_EVERY  seconds between progress lines when not on a terminal (default 60)
AOI_STAGE_NAME=${AOI_STAGE_NAME:-${0##*/}}
if [ "${CI:-}" = true ] && [ -z "${AOI_VERBOSE:-}" ]; then
  AOI_VERBOSE=1  # a CI log shows everything
fi

stage_quiet() {
  [ -n "${AOI_STAGE_LOG:-}" ] && [ "${AOI_VERBOSE:-0}" != 1 ]
}

_stage_say() {
  printf '%s: %s\n' "$AOI_STAGE_NAME" "$*"
}

_stage_duration() {  # seconds -> 45s, 3m05s, 1h02m
  local s=$1
  if [ "$s" -lt 60 ]; then
    printf '%ds' "$s"
  elif [ "$s" -lt 3600 ]; then
    printf '%dm%02ds' $((s / 60)) $((s % 60))
  else
    printf '%dh%02dm' $((s / 3600)) $((s % 3600 / 60))
  fi
}

# Copies its input to the log; with progress=1, shows how far the build is.
_stage_filter() {  # log progress
  local log=$1 progress=$2 line="" partial="" pct=-1 start=$SECONDS shown=$SECONDS now elapsed text tty=0
  local every=${AOI_STAGE_EVERY:-60}  # seconds between progress lines when they cannot be rewritten in place
  [ -t 1 ] && tty=1 && every=1
  exec 3>>"$log"
  while :; do
    if IFS= read -r -t 1 line; then
      line=$partial$line
      partial=""
      printf '%s\n' "$line" >&3
      if [ "$progress" = 1 ]; then
        now=-1
        if [[ $line =~ ^\[\ *([0-9]{1,3})%\] ]]; then
          now=$((10#${BASH_REMATCH[1]}))
        elif [[ $line =~ ^\[([0-9]{1,9})/([0-9]{1,9})\]\  ]] && [ "${BASH_REMATCH[2]}" -gt 0 ]; then
          now=$((10#${BASH_REMATCH[1]} * 100 / 10#${BASH_REMATCH[2]}))
        fi
        [ "$now" -le "$pct" ] || pct=$now  # parallel jobs print out of order: the highest so far
      fi
    else
      if [ $? -le 128 ]; then  # the end of the output (and a last line without a newline)
        line=$partial$line
        [ -z "$line" ] || printf '%s\n' "$line" >&3
        break
      fi
      partial+=$line  # read timed out in the middle of a line
    fi
    [ "$progress" = 1 ] || continue
    now=$SECONDS
    [ $((now - shown)) -ge "$every" ] || continue
    shown=$now
    elapsed=$((now - start))
    text="$(_stage_duration "$elapsed")"
    if [ "$pct" -ge 0 ]; then
      text="$pct% after $text"
      if [ "$pct" -ge 5 ] && [ "$pct" -lt 100 ] && [ "$elapsed" -ge 30 ]; then
        text+=", about $(((elapsed * (100 - pct) / pct + 59) / 60)) min left"
      fi
    fi
    if [ "$tty" = 1 ]; then
      printf '\r\033[K%s:   %s' "$AOI_STAGE_NAME" "$text"
    else
      _stage_say "  $text"
    fi
  done
  [ "$tty" = 0 ] || [ "$progress" = 0 ] || printf '\r\033[K'
  exec 3>&-
  return 0
}

stage_run() {
  local progress=0
  if [ "$1" = --progress ]; then
    progress=1
    shift
  fi
  local title=$1
  shift
  if [ -z "${AOI_STAGE_LOG:-}" ]; then
    "$@"
    return
  fi
  local log=$AOI_STAGE_LOG start=$SECONDS status=0 offset
  mkdir -p "$(dirname "$log")"
  offset=$(($(stat -c %s "$log" 2>/dev/null || echo 0) + 1))  # where this stage's part of the log begins
  printf '\n== %s  %s\n== $ %s\n' "$(date '+%F %T')" "$title" "$*" >>"$log"
  # Left of ||, errexit is off for the whole group: the command's own status is kept, with or without pipefail.
  local shown=${log#"$PWD"/}  # relative to where the script runs, when under it
  if ! stage_quiet; then
    _stage_say "$title... (also in $shown)"
    { "$@" 2>&1 | tee -a "$log"; status=${PIPESTATUS[0]}; } || true
  else
    _stage_say "$title... (log: $shown)"
    { "$@" 2>&1 | _stage_filter "$log" "$progress"; status=${PIPESTATUS[0]}; } || true
  fi
  if [ "$status" != 0 ]; then
    {
      if stage_quiet; then
        _stage_say "$title failed (exit status $status); the last 40 lines of its output:"
        tail -c "+$offset" "$log" | tail -n 40 | sed 's/^/    /'
      else
        _stage_say "$title failed (exit status $status)"
      fi
      _stage_say "the full log: $log"
    } >&2
    printf '== exit status %s after %s\n' "$status" "$(_stage_duration $((SECONDS - start)))" >>"$log"
    return "$status"
  fi
  _stage_say "  done in $(_stage_duration $((SECONDS - start)))"
}
