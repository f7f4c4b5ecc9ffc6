#!/usr/bin/env python3
"""aoi at two (or more) commits, side by side (prints, never asserts): the checks a change to the service's
core must pass with no regression beyond noise. Each commit is built in a worktree of its own (the same
llama.cpp checkout and compiler flags for all), then every round measures each commit in turn, one server at a
time, the order alternating between rounds; the table shows medians over the rounds. bench/versions/run.sh
builds this checkout's client and runs this.

    versions_bench.py --model GGUF --client BIN [--threads N] [--rounds N] [--out DIR] REV REV...

Measured per commit and round:
  push       POST /v1/sessions/{id}/data of one record on a kept-alive connection: p50 and p99 of --pushes
  flash hit  the commit's aoi-bench-flash: a registered question answered from the flash cache over HTTP, p50
  question   this checkout's aoi-bench-multitenant against the commit's `aoi serve` with 8 sessions: session 0's
             question p50 beside 7 idle neighbours, and while the 7 ingest a backlog
  ingestion  the commit's aoi-bench-ingest: aoi's ingestion rate against llama.cpp's own prefill of the same
             tokens at the same depth (in one process, one timed at a time)
"""
import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import benchlib  # noqa: E402

ROOT = benchlib.ROOT


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def build(rev, out, jobs):
    """The commit's aoi and benchmarks, built in a worktree under `out` (kept between runs)."""
    sha = subprocess.check_output(["git", "-C", ROOT, "rev-parse", "--verify", rev + "^{commit}"], text=True).strip()
    src = os.path.join(out, "src-" + sha[:10])
    if not os.path.isdir(src):
        subprocess.check_call(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", src, sha])
    # This checkout's llama.cpp, at the same place relative to the tree: with the tree as ccache's base
    # directory, its objects are the ones this checkout's build compiled already.
    deps = os.path.join(src, "deps")
    os.makedirs(deps, exist_ok=True)
    if not os.path.exists(os.path.join(deps, "llama.cpp")):
        os.symlink(os.path.join(ROOT, "deps", "llama.cpp"), os.path.join(deps, "llama.cpp"))
    bld = os.path.join(src, "build")
    env = dict(os.environ, CCACHE_BASEDIR=src, CCACHE_NOHASHDIR="1")
    launcher = ["-DCMAKE_C_COMPILER_LAUNCHER=ccache", "-DCMAKE_CXX_COMPILER_LAUNCHER=ccache"]
    subprocess.check_call(["cmake", "-S", src, "-B", bld, "-DCMAKE_BUILD_TYPE=Release"] + launcher,
                          env=env, stdout=subprocess.DEVNULL)
    log(f"== building {rev} ({sha[:10]}) in {bld}")
    subprocess.check_call(["cmake", "--build", bld, "-j", str(jobs), "--target", "aoi", "aoi-bench-flash",
                           "aoi-bench-ingest"], env=env, stdout=subprocess.DEVNULL)
    return {"rev": rev, "sha": sha[:10], "build": bld}


class Server:
    def __init__(self, binary, model, threads, extra):
        self.port = benchlib.free_port()
        self.proc = subprocess.Popen([binary, "serve", "--model", model, "--host", "127.0.0.1", "--port",
                                      str(self.port), "--threads", str(threads), "--memory-only"] + extra,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 300
        while self.call("GET", "/health")[0] != 200:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise RuntimeError("aoi serve did not start")
            time.sleep(0.05)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def call(self, method, path, body=None):
        try:
            return benchlib.json_call(self.port, method, path, body, timeout=120)
        except OSError:
            return 0, None

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def percentile(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def measure_push(v, args):
    srv = Server(os.path.join(v["build"], "tools", "aoi"), args.model, args.threads,
                 ["--max-sessions", "2", "--ctx-size", "16384"])
    try:
        status, body = srv.call("POST", "/v1/sessions", {"id": "push", "system": "You read log lines."})
        if status != 201:
            raise RuntimeError(f"creating the push session: {status} {body}")
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=60)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        ms = []
        for i in range(args.warmup + args.pushes):
            line = f"2026-11-26T10:{i // 60 % 60:02d}:{i % 60:02d} host{i % 7} GET /api/{i % 13} 200 {i % 97} ms"
            t0 = time.perf_counter()
            conn.request("POST", "/v1/sessions/push/data", body=json.dumps({"records": [line]}),
                         headers={"content-type": "application/json"})
            r = conn.getresponse()
            r.read()
            elapsed = (time.perf_counter() - t0) * 1000
            if r.status != 202:
                raise RuntimeError(f"push: {r.status}")
            if i >= args.warmup:
                ms.append(elapsed)
            time.sleep(0.002)  # a stream's pace, not a flood: the ring never fills
        conn.close()
        return {"push_p50": statistics.median(ms), "push_p99": percentile(ms, 0.99)}
    finally:
        srv.stop()


def measure_flash(v, args):
    out = subprocess.run([os.path.join(v["build"], "bench", "aoi-bench-flash"), "-m", args.model, "-t",
                          str(args.threads), "--depth", "512", "--hits", str(args.hits), "--rounds", "1", "--ks", "1"],
                         capture_output=True, text=True, check=True).stdout
    rows = out.split("## Flash hit over HTTP", 1)[1].splitlines()
    row = next(r for r in rows if re.match(r"\| [0-9.]+ \|", r))
    return {"flash_p50": float(row.split("|")[1])}


def measure_questions(v, args):
    n = 8
    window = args.tokens + (args.backlog + 8) * 70
    cells = (n + 2) * ((window + 1024 + 255) // 256 * 256)
    srv = Server(os.path.join(v["build"], "tools", "aoi"), args.model, args.threads,
                 ["--ctx-size", str(cells), "--max-sessions", str(n), "--pool-slots", "1", "--spare-seqs", "1",
                  "--batch-size", "512", "--ubatch-size", "512"])
    try:
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run([args.client, "--aoi", srv.url, "--sessions", str(n), "--tokens", str(args.tokens),
                            "--answer-tokens", "8", "--questions", str(args.questions), "--iterations", "1",
                            "--bars-per-iteration", "2", "--backlog", str(args.backlog), "--out", tmp],
                           capture_output=True, text=True, check=True)
            with open(os.path.join(tmp, f"results-{n}.json")) as f:
                r = json.load(f)
        return {"idle_p50": r["idle"]["p50_ms"], "loaded_p50": r["loaded"]["p50_ms"]}
    finally:
        srv.stop()


def measure_ingestion(v, args):
    out = subprocess.run([os.path.join(v["build"], "bench", "aoi-bench-ingest"), "-m", args.model, "-t",
                          str(args.threads), "--tokens", str(args.ingest_tokens), "--depths", str(args.tokens),
                          "--repeats", "1", "--queries", "3"],
                         capture_output=True, text=True, check=True).stdout
    m = re.search(r"depth \d+, run 1: llama\.cpp ([0-9.]+) tok/s, aoi ([0-9.]+) tok/s", out)
    if not m:
        raise RuntimeError("aoi-bench-ingest printed no ingestion line")
    llama, aoi = float(m.group(1)), float(m.group(2))
    return {"ingest_tok_s": aoi, "prefill_tok_s": llama, "ingest_vs_prefill": aoi / llama}


METRICS = [
    ("push_p50", "push over HTTP, p50 (ms)", 2),
    ("push_p99", "push over HTTP, p99 (ms)", 2),
    ("flash_p50", "flash hit over HTTP, p50 (ms)", 3),
    ("idle_p50", "question beside 7 idle neighbours, p50 (ms)", 0),
    ("loaded_p50", "question while 7 neighbours ingest, p50 (ms)", 0),
    ("ingest_tok_s", "ingestion (tokens/s)", 0),
    ("prefill_tok_s", "llama.cpp prefill, same tokens (tokens/s)", 0),
    ("ingest_vs_prefill", "ingestion / llama.cpp prefill", 2),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("revs", nargs="+")
    ap.add_argument("--model", required=True)
    ap.add_argument("--client", required=True, help="aoi-bench-multitenant (this checkout's)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--pushes", type=int, default=400)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--hits", type=int, default=300)
    ap.add_argument("--tokens", type=int, default=1024, help="tokens each multi-tenant session holds")
    ap.add_argument("--backlog", type=int, default=40, help="bars each neighbour ingests in the loaded phase")
    ap.add_argument("--questions", type=int, default=8)
    ap.add_argument("--ingest-tokens", type=int, default=1024)
    ap.add_argument("--out", default=os.path.join(ROOT, "bench-out", "versions"))
    ap.add_argument("--command", default="")
    args = ap.parse_args()
    if len(args.revs) < 2:
        ap.error("name two commits or more")
    os.makedirs(args.out, exist_ok=True)
    versions = [build(rev, args.out, os.cpu_count()) for rev in args.revs]
    runs = {v["sha"]: {} for v in versions}
    for rnd in range(args.rounds):
        order = versions if rnd % 2 == 0 else list(reversed(versions))
        for v in order:
            for measure in (measure_push, measure_flash, measure_questions, measure_ingestion):
                for k, x in measure(v, args).items():
                    runs[v["sha"]].setdefault(k, []).append(x)
            log(f"round {rnd + 1}, {v['rev']}: " + ", ".join(f"{k} {x[-1]:.3g}" for k, x in runs[v["sha"]].items()))
    print(benchlib.measured_line(benchlib.commit(), args.command or "bench/versions/versions_bench.py"))
    print(f"\nmodel {os.path.basename(args.model)}, {args.threads} threads; medians of {args.rounds} rounds, the "
          "commits measured in turn (order alternating), one server at a time\n")
    head = "| | " + " | ".join(f"{v['rev']} ({v['sha'][:7]})" for v in versions) + " | change |"
    print(head)
    print("|---|" + "---:|" * (len(versions) + 1))
    for key, name, digits in METRICS:
        meds = [statistics.median(runs[v["sha"]][key]) for v in versions]
        spread = [f"{statistics.median(runs[v['sha']][key]):.{digits}f} ({min(runs[v['sha']][key]):.{digits}f}–"
                  f"{max(runs[v['sha']][key]):.{digits}f})" for v in versions]
        change = f"{(meds[-1] / meds[0] - 1) * 100:+.0f}%" if meds[0] else "-"
        print(f"| {name} | " + " | ".join(spread) + f" | {change} |")
    print("\n(each cell: median (min–max over the rounds); change: the last commit against the first)")


if __name__ == "__main__":
    main()
