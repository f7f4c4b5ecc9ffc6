#!/usr/bin/env bash
# Installs everything aoi needs on Debian 12 and obtains the pinned llama.cpp source.
# Idempotent: a second run checks and returns quickly.
#
#   scripts/setup.sh            packages + llama.cpp
#   AOI_SETUP_PACKAGES=0 ...    skip the apt step (packages already present)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

packages=(
  build-essential cmake git ca-certificates pkg-config
  libboost-dev nlohmann-json3-dev libcli11-dev libspdlog-dev libfmt-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  gnuplot-nox curl prometheus ccache python3
)

missing_packages() {
  local p
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
  # npm ships with nodejs from some sources and as its own package from Debian.
  command -v npm >/dev/null 2>&1 || echo npm
}

if [ "${AOI_SETUP_PACKAGES:-1}" != 0 ]; then
  mapfile -t missing < <(missing_packages)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    sudo_cmd=()
    [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
    export DEBIAN_FRONTEND=noninteractive
    "${sudo_cmd[@]}" apt-get update -qq
    "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
  fi
fi

"$here/fetch-llama.sh"
