#!/usr/bin/env bash
# Obtains the pinned llama.cpp source tree without reaching GitHub: the npm package node-llama-cpp ships
# it as a git bundle. The tarball is checked against the sha256 kept in cmake/llama.cpp.lock.
#
#   AOI_LLAMA_DIR   where the checkout goes (default: deps/llama.cpp, git-ignored)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# shellcheck source=../cmake/llama.cpp.lock
. "$root/cmake/llama.cpp.lock"

dest=${AOI_LLAMA_DIR:-$root/deps/llama.cpp}
stamp="$dest/.aoi-pinned"

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$LLAMA_NPM_PACKAGE@$LLAMA_NPM_VERSION $LLAMA_COMMIT" ]; then
  exit 0
fi

cache=${AOI_DEPS_CACHE:-$root/deps/cache}
mkdir -p "$cache"
tarball="$cache/$LLAMA_NPM_PACKAGE-$LLAMA_NPM_VERSION.tgz"

verify() { echo "$LLAMA_NPM_SHA256  $1" | sha256sum --check --status; }

if [ ! -f "$tarball" ] || ! verify "$tarball"; then
  echo "fetch-llama: npm pack $LLAMA_NPM_PACKAGE@$LLAMA_NPM_VERSION"
  rm -f "$tarball"
  (cd "$cache" && npm pack --silent "$LLAMA_NPM_PACKAGE@$LLAMA_NPM_VERSION" >/dev/null)
fi
if ! verify "$tarball"; then
  echo "fetch-llama: sha256 mismatch for $tarball (expected $LLAMA_NPM_SHA256)" >&2
  exit 1
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -xzf "$tarball" -C "$work" package/llama/gitRelease.bundle package/llama/llama.cpp.info.json
echo "fetch-llama: llama.cpp $(tr -d ' \n' < "$work/package/llama/llama.cpp.info.json")"

rm -rf "$dest"
git -c advice.detachedHead=false clone --quiet "$work/package/llama/gitRelease.bundle" "$dest"
git -C "$dest" -c advice.detachedHead=false checkout --quiet "$LLAMA_COMMIT"
echo "$LLAMA_NPM_PACKAGE@$LLAMA_NPM_VERSION $LLAMA_COMMIT" > "$stamp"
echo "fetch-llama: ready at $dest"
