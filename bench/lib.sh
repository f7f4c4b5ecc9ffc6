# What the benchmark scripts share: the build, the model, servers started and stopped with the script, and
# the commit a run is measured at. Sourced from the repository root by bench/*/run.sh.

# bench_build TARGET...: installs (what the tests and benchmarks need: gnuplot, Google Benchmark) and builds
# (unless --skip-build), then the benchmark's own targets.
bench_build() {
  scripts/setup.sh --tests
  scripts/build.sh build
  cmake --build build -j"$(nproc)" --target "$@" >/dev/null
}

# bench_model PATH: generates the models the presets name when they are not there yet.
bench_model() {
  [ -f "$1" ] && return 0
  case "$1" in
    build/models/test-micro.gguf) build/tools/aoi-gen-model --shape test-micro --type f16 -o "$1" ;;
    models/smollm2-135m-q8_0.gguf) build/tools/aoi-gen-model --shape smollm2-135m --type q8_0 -o "$1" ;;
    # Weights that quote the prompt (the stateless benchmark's copy scenario).
    build/models/copy-micro.gguf) build/tools/aoi-gen-model --shape copy-micro --type q8_0 --weights copy -o "$1" ;;
    models/smollm2-135m-copy-q8_0.gguf)
      build/tools/aoi-gen-model --shape smollm2-135m --type q8_0 --weights copy -o "$1" ;;
    *) echo "no model at $1" >&2; exit 2 ;;
  esac
}

# Servers start in the script's own shell (never inside $(...)), so that their pids are known here and they
# stop with the script.
pids=()
stop_servers() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap stop_servers EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' 2>/dev/null ||
              echo $((20000 + RANDOM % 20000)); }

# wait_ready URL LOG: until the server answers /health (10 minutes at most: a large model loads slowly).
wait_ready() {
  for _ in $(seq 1 1200); do
    curl -sf "$1/health" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "server at $1 did not become ready; its log:" >&2; tail -20 "$2" >&2; exit 1
}

# The commit the run is measured at: abc1234, or abc1234+changes when tracked files differ from it (then
# bench/update_docs.py refuses the run's tables). One definition for every script and benchmark:
# bench/benchlib.py. Take it when the run starts, before the build: that is the tree the binaries come from.
bench_commit() { python3 bench/benchlib.py commit; }

# bench_command SCRIPT ARG...: the command line that started the run, as typed (SCRIPT: the script's path from
# the repository root), for the tables to name. Call it before the options are parsed, with "$@".
bench_command() { python3 bench/benchlib.py command "$@"; }

# json_string TEXT: TEXT as a JSON string (quotes and backslashes escaped), for settings.json.
json_string() { python3 -c 'import json, sys; print(json.dumps(sys.argv[1]))' "$1"; }
