#!/usr/bin/env bash
# The deployment files against the built binary (Docker itself is not needed, nor run):
#   tests/scripts/deploy_test.sh AOI_BIN MODEL
# - deploy/aoi.service: `systemd-analyze verify` has nothing to say about it; its ExecStart, expanded as systemd
#   expands it (Environment= values, ${VAR} one word, $VAR split, $STATE_DIRECTORY set), starts a server whose
#   /ready answers 200 and which keeps its sessions in the state directory; ExecReload's signal leaves it running
#   (it reloads keys); KillSignal stops it with status 0 within TimeoutStopSec.
# - Dockerfile: the scripts and files it uses exist; the runtime stage installs the Debian package of every
#   shared library the binary links (beyond what debian:12-slim has); the entrypoint's flags are `aoi serve`
#   flags; EXPOSE, the health check and --port agree; it runs as a user other than root.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
aoi=$(readlink -f "${1:?usage: deploy_test.sh AOI_BIN MODEL}")
model=$(readlink -f "${2:?usage: deploy_test.sh AOI_BIN MODEL}")
unit="$root/deploy/aoi.service"
dockerfile="$root/Dockerfile"
failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
work=$(mktemp -d)
server_pid=
cleanup() {
  [ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT

serve_help=$("$aoi" serve --help 2>&1)
# Every --flag among the arguments is one of `aoi serve`'s.
check_flags() {
  local what=$1 arg
  shift
  for arg in "$@"; do
    case "$arg" in
      --*) grep -qE -- "(^|[ ,])${arg}( |,|$)" <<<"$serve_help" || fail "$what: $arg is not an aoi serve flag" ;;
    esac
  done
}

# ---- deploy/aoi.service ---------------------------------------------------------------------------------------

value() { sed -n "s/^$1=//p" "$unit" | tail -n 1; }

sed "s|/usr/local/bin/aoi|$aoi|g" "$unit" >"$work/aoi.service"
verify_out=$(systemd-analyze verify "$work/aoi.service" 2>&1)
verify_rc=$?
if [ "$verify_rc" -ne 0 ] || [ -n "$verify_out" ]; then
  fail "systemd-analyze verify deploy/aoi.service (status $verify_rc): $verify_out"
fi
[ "$(value Type)" = exec ] || fail "Type= is $(value Type): aoi does not notify systemd (sd_notify), so exec"
[ "$(value StateDirectory)" = aoi ] || fail "StateDirectory= is not aoi"

# The environment systemd gives ExecStart: the unit's Environment= lines, then the state directory.
declare -A env=()
while IFS= read -r line; do
  env[${line%%=*}]=${line#*=}
done < <(sed -n 's/^Environment=//p' "$unit")
env[AOI_MODEL]=$model
env[AOI_HOST]=127.0.0.1
env[AOI_PORT]=0
env[STATE_DIRECTORY]="$work/state"
mkdir -p "$work/state"
exec_start=$(value ExecStart)
exec_start=${exec_start//\/usr\/local\/bin\/aoi/$aoi}
# ${VAR} is one word, $VAR is split on whitespace (systemd.service(5), "Command lines").
expanded=$(sed -E 's/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/"${\1}"/g' <<<"$exec_start")
command=()
eval "$(for k in "${!env[@]}"; do printf '%s=%q\n' "$k" "${env[$k]}"; done)
command=($expanded)"
check_flags "aoi.service ExecStart" "${command[@]}"
printf '%s\n' "${command[@]}" | grep -qx -- "--data-dir" || fail "ExecStart does not pass --data-dir"

"${command[@]}" >"$work/out.log" 2>&1 &
server_pid=$!
url=
for _ in $(seq 1200); do
  url=$(sed -n 's|^aoi: listening on \(http://[^ ]*\).*|\1|p' "$work/out.log")
  [ -n "$url" ] && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.1
done
if [ -z "$url" ]; then
  fail "the unit's ExecStart did not start a server: $(tail -n 20 "$work/out.log")"
else
  ready=$(curl -sS -w ' %{http_code}' "$url/ready")
  [[ "$ready" == *'"status":"ready"'*' 200' ]] || fail "GET /ready after the unit's start: $ready"
  grep -q "sessions in $work/state " "$work/out.log" || fail "the sessions are not in \$STATE_DIRECTORY: $(cat "$work/out.log")"
  reload=$(value ExecReload)
  reload=${reload//\$MAINPID/$server_pid}
  # shellcheck disable=SC2086  # a command line, split as systemd splits it
  $reload || fail "ExecReload ($reload) failed"
  sleep 0.5
  kill -0 "$server_pid" 2>/dev/null || fail "the server did not survive ExecReload: $(tail -n 20 "$work/out.log")"
  grep -q "SIGHUP" "$work/out.log" || fail "the server did not log the SIGHUP of ExecReload"
  signal=$(value KillSignal)
  kill "-${signal#SIG}" "$server_pid"
  timeout=$(value TimeoutStopSec)
  stopped=0
  for _ in $(seq $((${timeout:-90} * 10))); do
    kill -0 "$server_pid" 2>/dev/null || { stopped=1; break; }
    sleep 0.1
  done
  if [ "$stopped" = 1 ]; then
    wait "$server_pid"
    rc=$?
    [ "$rc" -eq 0 ] || fail "exit status $rc after $signal: $(tail -n 20 "$work/out.log")"
  else
    fail "the server did not stop within TimeoutStopSec after $signal"
  fi
  server_pid=
fi

# ---- Dockerfile -----------------------------------------------------------------------------------------------

while read -r script; do
  [ -x "$root/$script" ] || fail "Dockerfile: $script is not an executable file of the repository"
done < <(grep -v '^#' "$dockerfile" | grep -oE '(^|[ =])scripts/[A-Za-z0-9_./-]+\.sh' | tr -d ' =' | sort -u)
grep -v '^#' "$dockerfile" | grep -q 'scripts/setup.sh' || fail "Dockerfile: does not install with scripts/setup.sh"
grep -v '^#' "$dockerfile" | grep -q 'scripts/build.sh' || fail "Dockerfile: does not build with scripts/build.sh"
while read -r src; do
  [ -e "$root/$src" ] || fail "Dockerfile: COPY $src: no such file in the repository"
done < <(grep -E '^COPY ' "$dockerfile" | grep -v -- '--from' | awk '{print $2}')

# The runtime stage: from the last FROM on.
runtime=$(awk '/^FROM /{stage=""} {stage=stage $0 "\n"} END{printf "%s", stage}' "$dockerfile")
installed=$(grep -oE 'install -y[^&]*' <<<"$runtime" | head -n 1)
# What debian:12-slim holds already.
base_packages=" libc6 libgcc-s1 libstdc++6 "
# What installing those packages brings: their dependencies, as this machine's dpkg records them.
brought=" "
pending=$(grep -oE '[a-z0-9][a-z0-9.+-]+' <<<"${installed#install -y}" | grep -vE '^(qq|q|no-install-recommends)$')
while [ -n "$pending" ]; do
  next=""
  for p in $pending; do
    [[ "$brought" == *" $p "* ]] && continue
    brought+="$p "
    deps=$(dpkg-query -W -f='${Depends}, ${Pre-Depends}' "$p" 2>/dev/null | tr ',|' '\n\n' | awk '{print $1}' |
      sed 's/:any$//' | grep -E '^[a-z0-9]' || true)
    next+=" $deps"
  done
  pending=$(tr ' ' '\n' <<<"$next" | grep -v '^$' | sort -u | tr '\n' ' ' | sed 's/ *$//')
done
while read -r lib; do
  [ -e "$lib" ] || continue
  # The image builds a release binary: a sanitizer build's runtimes (CI's ASan and TSan stages) are not its.
  case "$(basename "$lib")" in libasan.so* | libubsan.so* | libtsan.so* | liblsan.so*) continue ;; esac
  pkg=$(dpkg -S "$lib" 2>/dev/null || dpkg -S "$(readlink -f "$lib")" 2>/dev/null || dpkg -S "/usr$lib" 2>/dev/null)
  pkg=${pkg%%:*}
  if [ -z "$pkg" ]; then
    fail "Dockerfile: no Debian package holds $lib, which the binary links"
  elif [[ "$base_packages" != *" $pkg "* ]] && [[ "$brought" != *" $pkg "* ]]; then
    fail "Dockerfile: the runtime stage does not install $pkg ($lib, which the binary links)"
  fi
done < <(ldd "$aoi" | awk '$2 == "=>" {print $3}')

entrypoint=$(sed -n 's/^ENTRYPOINT \[\(.*\)\]$/\1/p' "$dockerfile" | tr -d '",')
read -r -a entry_args <<<"$entrypoint"
if [ "${entry_args[0]}" != /usr/local/bin/aoi ] || [ "${entry_args[1]}" != serve ]; then
  fail "Dockerfile: the entrypoint is not /usr/local/bin/aoi serve: $entrypoint"
fi
[ "$(sed -n 's|^COPY --from=build /src/build/tools/aoi ||p' "$dockerfile")" = /usr/local/bin/aoi ] ||
  fail "Dockerfile: the binary is not copied to /usr/local/bin/aoi"
check_flags "Dockerfile ENTRYPOINT" "${entry_args[@]:2}"
port=$(grep -A1 -- '"--port"' <<<"$(sed -n 's/^ENTRYPOINT \[\(.*\)\]$/\1/p' "$dockerfile" | tr ',' '\n')" | tail -n 1 | tr -d ' "')
data_dir=$(grep -A1 -- '"--data-dir"' <<<"$(sed -n 's/^ENTRYPOINT \[\(.*\)\]$/\1/p' "$dockerfile" | tr ',' '\n')" | tail -n 1 | tr -d ' "')
grep -qx "EXPOSE $port" "$dockerfile" || fail "Dockerfile: EXPOSE is not the entrypoint's --port ($port)"
grep -q "http://127.0.0.1:$port/health" "$dockerfile" || fail "Dockerfile: the health check does not ask :$port/health"
grep -qx "VOLUME $data_dir" "$dockerfile" || fail "Dockerfile: VOLUME is not the entrypoint's --data-dir ($data_dir)"
user=$(sed -n 's/^USER //p' "$dockerfile" | tail -n 1)
if [ -z "$user" ] || [ "${user%%:*}" = 0 ] || [ "${user%%:*}" = root ]; then
  fail "Dockerfile: runs as root (USER '$user')"
fi

if [ "$failures" -gt 0 ]; then
  echo "deploy_test: $failures failed" >&2
  exit 1
fi
echo "deploy_test: deploy/aoi.service and Dockerfile checked"
