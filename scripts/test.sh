#!/usr/bin/env bash
# Runs every test. Installs what is missing, builds with warnings as errors, runs CTest (unit and integration
# suites), runs the suites that touch device state again with the model in llama.cpp's rpc-server (a non-host
# backend), runs the streaming benchmark's quick preset as a smoke test; then rebuilds aoi with AddressSanitizer +
# UndefinedBehaviorSanitizer (llama.cpp's objects from the compiler cache) and with ThreadSanitizer (llama.cpp
# instrumented too), each in its own build directory, and runs the suites each is for; last, builds the libFuzzer
# targets with Clang and runs each briefly (scripts/fuzz.sh runs them longer).
#
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --quick    the release build's tests only
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${AOI_JOBS:-$(nproc)}
# CTest runs $jobs tests at once, so each test's model computes on one thread: with more threads than cores,
# ggml's threads spin at every barrier of a pass for one that is not running (tests/support/test_models.h).
export AOI_TEST_THREADS=${AOI_TEST_THREADS:-1}
# Each stage's header says when it started, so that a slow CI shows where its time went.
stage() { printf '== [%dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$1"; }
# A skipped test counts as passed in CTest's summary: every run's report is checked against the allowlist
# (scripts/check-skips.py), and a label that must have tests and has none fails the run.
run_ctest() {
  local dir=$1 name=$2
  shift 2
  local status=0
  ctest --test-dir "$dir" --output-on-failure --no-tests=error --output-junit "$root/$dir/junit-$name.xml" "$@" ||
    status=$?
  scripts/check-skips.py "$root/$dir/junit-$name.xml" --stage "$name" || status=1
  return $status
}

scripts/setup.sh --tests
scripts/check-skips.py --list

stage "release build"
scripts/build.sh build
stage "release tests"
# --no-tests=error: a build that found no GoogleTest registers no unit tests, which must not pass as a run; nor
# may a build that registered no integration tests.
scripts/check-skips.py --labels build unit integration threads
run_ctest build release -j"$jobs"

[ "${1:-}" = "--quick" ] && exit 0

stage "non-host device: every layer and the KV cache in llama.cpp's rpc-server on loopback (the RPC backend)"
# The suites that touch device state: sequence operations and cross-stream copies, sequence state saved and
# restored, shared passes, drafts, greedy rows chosen on the device (auto with an rpc-server's output layer),
# and aoi serve --rpc end to end (the query and flash suites; integration.devices, which starts rpc-servers of its
# own, runs in the release stage). One rpc-server serves one client at a time: the tests run one by one.
cmake --build build -j"$jobs" --target ggml-rpc-server >/dev/null
rpc_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
build/bin/ggml-rpc-server -H 127.0.0.1 -p "$rpc_port" -t "$jobs" >build/rpc-server.log 2>&1 &
rpc_pid=$!
trap 'kill "$rpc_pid" 2>/dev/null || true' EXIT
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$rpc_port") 2>/dev/null && break; sleep 0.1; done
rpc_suites='^(DeviceTop2|Devices|Equivalence|EquivalenceControls|SessionImage|SessionInvariants|MultiTenant|Flash'
rpc_suites+='|Durability|PrefixCache|StatelessControls|Drafting)\.|^integration\.(query|flash)$'
AOI_TEST_RPC="127.0.0.1:$rpc_port" AOI_TEST_THREADS="$jobs" AOI_SERVE_ARGS="--rpc 127.0.0.1:$rpc_port" \
  run_ctest build rpc -j1 -R "$rpc_suites"
kill "$rpc_pid" 2>/dev/null || true
trap - EXIT

stage "streaming benchmark, quick preset (smoke test: it completes and aoi agrees with naive; no timings checked)"
cmake --build build -j"$jobs" --target llama-server aoi-bench-streaming >/dev/null
bench/streaming/run.sh --preset quick --skip-build --out build/bench-quick

stage "AddressSanitizer + UndefinedBehaviorSanitizer build"
# Not the model-family suite: it runs llama.cpp's code for each architecture, which this build does not
# instrument; aoi's own paths run here with the Llama test model.
# The sanitizer builds take the test models the release build made (see tests/CMakeLists.txt).
models="$root/build/models"
scripts/build.sh build-asan -DAOI_SANITIZE_ADDRESS=ON -DAOI_BUILD_BENCH=OFF \
  -DAOI_TEST_MODELS_FROM="$models" "-DAOI_TEST_LABELS=unit;threads"
stage "AddressSanitizer + UndefinedBehaviorSanitizer tests"
scripts/check-skips.py --labels build-asan unit integration
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
  run_ctest build-asan asan -j"$jobs" -LE families

stage "ThreadSanitizer build"
# Only the test binaries this stage runs (label threads) are built.
scripts/build.sh build-tsan -DAOI_SANITIZE_THREAD=ON -DAOI_BUILD_BENCH=OFF \
  -DAOI_TEST_MODELS_FROM="$models" -DAOI_TEST_LABELS=threads
stage "ThreadSanitizer tests"
scripts/check-skips.py --labels build-tsan threads
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
  run_ctest build-tsan tsan -j"$jobs" -L threads

stage "fuzz targets (Clang, libFuzzer): every seed and past breaker replayed, then 20 s of fuzzing each"
AOI_FUZZ_MODEL="$models/test-micro.gguf" scripts/fuzz.sh --seconds 20
scripts/check-skips.py --labels build-fuzz fuzz
run_ctest build-fuzz fuzz -L fuzz

stage "all tests passed"
