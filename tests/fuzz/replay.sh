#!/usr/bin/env bash
# Runs every file of the given folders through a fuzz target once (libFuzzer runs file arguments and exits):
# the seed corpus and the inputs that once broke the target must pass.
#   replay.sh TARGET_BINARY DIR...      exit 77 (skipped): the renderer target without its model
set -euo pipefail
bin=$1
shift
if [ "$(basename "$bin")" = fuzz_record_renderer ] && [ ! -f "${AOI_FUZZ_MODEL:-}" ]; then
  echo "replay: AOI_FUZZ_MODEL (${AOI_FUZZ_MODEL:-unset}) is not a file: skipped" >&2
  exit 77
fi
files=()
for dir in "$@"; do
  [ -d "$dir" ] || continue
  while IFS= read -r -d '' f; do files+=("$f"); done < <(find "$dir" -type f -print0 | sort -z)
done
if [ ${#files[@]} -eq 0 ]; then
  echo "replay: no inputs in $*" >&2
  exit 1
fi
echo "replay: ${#files[@]} inputs through $(basename "$bin")"
# A broken input exits 1 (libFuzzer says 77 by default, which ctest would take for "skipped").
exec "$bin" -error_exitcode=1 "${files[@]}"
