#!/usr/bin/env bash
# The main job: install, build, and stream a synthetic OHLCV feed into a session, asking questions as the
# context grows, in stateful and naive mode.
#   scripts/run.sh [--model PATH] [extra aoi replay options]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
model=""
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model|-m) model=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done

scripts/setup.sh
scripts/build.sh build

if [ -z "$model" ]; then
  model=models/smollm2-135m-q8_0.gguf
  [ -f "$model" ] || build/tools/aoi-gen-model --shape smollm2-135m --type q8_0 -o "$model"
fi
exec build/tools/aoi replay -m "$model" --checkpoints 1000,2000,4000 "${args[@]}"
