#!/usr/bin/env bash
# Soak test (not part of CI: it runs for minutes): 8 sessions x 100 records/s with questions and flash rounds
# against the release build, then checks that every accepted record was ingested or counted as dropped, that
# resident memory and KV cells stayed flat after the warm-up, and that no error event was sent.
#
#   scripts/soak.sh [--minutes 10] [--sessions 8] [--rate 100] [--ring 256] [--model PATH] [--out FILE.md]
# The model defaults to the generated test model of the release build.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh --tests
scripts/build.sh build
[ -f build/models/test-micro.gguf ] || ctest --test-dir build -R models.generate --output-on-failure >/dev/null
(cd tests/integration && npm ci --no-audit --no-fund >/dev/null)
export AOI_BIN="$root/build/tools/aoi" AOI_MODEL="${AOI_MODEL:-$root/build/models/test-micro.gguf}"
exec node tests/integration/soak.js "$@"
