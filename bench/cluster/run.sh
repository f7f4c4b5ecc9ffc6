#!/usr/bin/env bash
# The cluster benchmark in one command (prints, never asserts): a NATS JetStream server, three aoi replicas
# (aoi serve --cluster, a shared snapshot folder) behind HAProxy as deploy/haproxy ships it, and two single aoi
# servers (--fsync always, --fsync everysec), all on loopback and started here; cluster_bench.mjs times one
# system at a time:
#   - failover: kill -9 of the replica holding a session of 1K, 4K and 8K tokens -> the session answers again
#     through another replica, from its newest snapshot in the shared folder, and from its stream alone;
#   - push latency (one record) through HAProxy + JetStream against a single server's fsync always / everysec;
#   - a question's overhead when the replica it reaches forwards it, against asking the holder directly.
# Two cores show no throughput scaling with replicas; none is measured.
#
#   bench/cluster/run.sh [--model PATH] [--threads N] [--lease-ttl-ms MS] [--sizes 1024,4096,8192] [--out DIR]
#                        [--cache-type-k T] [--cache-type-v T] [--skip-build]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
# shellcheck source=../lib.sh
. bench/lib.sh
command=$(bench_command bench/cluster/run.sh "$@")
commit=$(bench_commit)

model=models/smollm2-135m-q8_0.gguf threads=1 ttl=2000 sizes=1024,4096,8192 out="" skip_build=0 kv_k=q8_0 kv_v=f16
while [ $# -gt 0 ]; do
  case "$1" in
    --model) model=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --lease-ttl-ms) ttl=$2; shift 2 ;;
    --sizes) sizes=$2; shift 2 ;;
    --cache-type-k) kv_k=$2; shift 2 ;;
    --cache-type-v) kv_v=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --skip-build) skip_build=1; shift ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[ "$skip_build" = 1 ] || bench_build aoi
bench_model "$model"
out=${out:-bench-out/cluster-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
(cd tests/integration && npm ci --no-audit --no-fund >/dev/null)
node bench/cluster/cluster_bench.mjs --aoi build/tools/aoi --model "$model" --threads "$threads" \
  --lease-ttl-ms "$ttl" --sizes "$sizes" --cache-type-k "$kv_k" --cache-type-v "$kv_v" --out "$out" \
  --commit "$commit" --command "$command"
