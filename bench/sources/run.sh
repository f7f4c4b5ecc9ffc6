#!/usr/bin/env bash
# The sources benchmark in one command (prints, never asserts): sessions fed by Redis, Kafka (librdkafka's mock
# cluster: Debian 12 packages no Kafka broker) and MQTT, each broker started on loopback, against the same
# records pushed over HTTP — publish → data_updated latency, consume rate against the ingestion rate, and the
# time to the first new record after a kill -9 (sources_bench.py says how each is measured). Writes
# OUT/sources.md, which `bench/update_docs.py sources OUT/sources.md` puts into docs/benchmarks.md.
#
#   bench/sources/run.sh [--model PATH] [--threads N] [--samples N] [--backlog N] [--recoveries N]
#                        [--repeats N] [--brokers LIST] [--out DIR] [--skip-build]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
command=$(bench_command bench/sources/run.sh "$@")
commit=$(bench_commit)

model=build/models/test-micro.gguf threads=2 out=bench-out skip_build=0 extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --samples | --backlog | --recoveries | --repeats | --brokers) extra+=("$1" "$2"); shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$skip_build" = 1 ] || bench_build aoi aoi-gen-model aoi-kafka-mock
bench_model "$model"
mkdir -p "$out"
python3 bench/sources/sources_bench.py --aoi build/tools/aoi --model "$model" \
  --kafka-mock build/tests/integration/aoi-kafka-mock --threads "$threads" --command "$command" \
  --commit "$commit" --out "$out/sources.md" "${extra[@]}"
