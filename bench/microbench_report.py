#!/usr/bin/env python3
"""The docs' tables of the two micro-benchmarks (rendering records, and the ring's push path), from a run:
runs build/bench/aoi-bench-render, then build/bench/aoi-bench-ring (one at a time), each with
--benchmark_repetitions (medians kept), and prints the markdown, naming the commit it was measured at.

    bench/microbench_report.py [--out FILE] [--model PATH] [--repetitions N] [--min-time SECONDS]
                               [--render-json FILE --ring-json FILE --commit SHA]

--out FILE: the markdown goes there too; then bench/update_docs.py microbench FILE puts it into
docs/benchmarks.md. --render-json/--ring-json read what an earlier run wrote (--benchmark_out in Google
Benchmark's JSON format, with --benchmark_repetitions and --benchmark_report_aggregates_only=true) instead of
running that binary; --commit then names where it ran (default: this checkout's commit). Google Benchmark's
own options go after `--` to both binaries. Python 3's standard library only.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

# bench/benchlib.py: what the benchmark scripts share (no bytecode left beside it in the tree).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

RENDER = "build/bench/aoi-bench-render"
RING = "build/bench/aoi-bench-ring"


def run(binary, args, json_path, extra, env=None):
    """Runs one benchmark binary, its results as JSON in json_path; returns what it printed."""
    if not os.access(binary, os.X_OK):
        sys.exit(f"{binary} is not built (scripts/setup.sh --tests installs Google Benchmark; then "
                 f"cmake --build build --target {os.path.basename(binary)})")
    cmd = [binary, f"--benchmark_repetitions={args.repetitions}", "--benchmark_report_aggregates_only=true",
           f"--benchmark_out={json_path}", "--benchmark_out_format=json"]
    if args.min_time is not None:
        cmd.append(f"--benchmark_min_time={args.min_time}")
    cmd += extra
    print("== " + " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    sys.stderr.write(p.stdout + p.stderr)
    if p.returncode != 0:
        sys.exit(f"{binary} failed ({p.returncode})")
    return p.stdout


def medians(path):
    """{(function, capacity or None): the median aggregate's entry} of a Google Benchmark JSON file; and its
    context."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    reps = set()
    for b in data["benchmarks"]:
        if b.get("run_type") != "aggregate" or b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        cap = re.search(r"/capacity:(\d+)", name)
        out[(name.split("/")[0], int(cap.group(1)) if cap else None)] = b
        reps.add(b.get("repetitions"))
    if not out:
        sys.exit(f"{path} holds no medians: run with --benchmark_repetitions=N (N > 1) and "
                 "--benchmark_report_aggregates_only=true")
    return out, data.get("context", {}), reps


def to_us(entry, field="cpu_time"):
    scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[entry["time_unit"]]
    return entry[field] * scale


def fmt(x, digits):
    return f"{x:.{digits}f}"


def ns_text(x):
    return fmt(x, 1) if x < 100 else fmt(x, 0)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", help="write the markdown to this file too")
    ap.add_argument("--model", default="models/smollm2-135m-q8_0.gguf",
                    help="the model whose tokenizer aoi-bench-render uses (AOI_BENCH_MODEL)")
    ap.add_argument("--repetitions", type=int, default=5, help="--benchmark_repetitions (the median is kept)")
    ap.add_argument("--min-time", help="--benchmark_min_time (seconds; Google Benchmark's default when omitted)")
    ap.add_argument("--render-json", help="aoi-bench-render's JSON from an earlier run (not run again)")
    ap.add_argument("--ring-json", help="aoi-bench-ring's JSON from an earlier run (not run again)")
    ap.add_argument("--commit", help="the commit the tables name (default: this checkout's)")
    ap.add_argument("--command", help="the command the tables name (default: this one)")
    ap.add_argument("extra", nargs="*", help="after --: more options for both binaries")
    args = ap.parse_args()
    if args.repetitions < 2:
        sys.exit("--repetitions must be 2 or more (the tables are medians)")
    # Taken before anything runs: the binaries are this tree's.
    commit = args.commit or benchlib.commit()
    command = args.command or benchlib.command(["bench/microbench_report.py"] + sys.argv[1:])

    tmp = tempfile.mkdtemp(prefix="aoi-microbench-")
    render_out = ""
    render_json = args.render_json
    if not render_json:
        if not os.path.exists(args.model):
            sys.exit(f"no model at {args.model} (build/tools/aoi-gen-model --shape smollm2-135m --type q8_0 "
                     f"-o {args.model}, or --model)")
        render_json = os.path.join(tmp, "render.json")
        render_out = run(RENDER, args, render_json, args.extra, dict(os.environ, AOI_BENCH_MODEL=args.model))
    ring_json = args.ring_json
    if not ring_json:
        ring_json = os.path.join(tmp, "ring.json")
        run(RING, args, ring_json, args.extra)

    render, render_ctx, render_reps = medians(render_json)
    ring, ring_ctx, ring_reps = medians(ring_json)
    md = []
    md.append(benchlib.measured_line(commit, command))
    md.append("")
    ctx = ring_ctx or render_ctx
    host = f"{ctx.get('num_cpus', '?')} CPUs at {ctx.get('mhz_per_cpu', '?')} MHz" if ctx else "host unknown"
    md.append(f"Google Benchmark, {host}; every figure is the median of "
              f"{'/'.join(str(r) for r in sorted(render_reps | ring_reps))} repetitions.")
    md.append("")

    # Rendering: CPU time per record (the benchmarks are single-threaded; CPU time leaves out what other
    # processes take from a shared machine).
    model = re.search(r"^model: (.*) \((.*)\)$", render_out, re.M)
    choice = re.search(r"^renderer \(built in [^)]*\): (.*)$", render_out, re.M)
    paths = [("BM_TemplateFragments", "the template with pre-tokenized fragments (digit groups, separators)"),
             ("BM_PlainLine", "the rendered line, tokenized (plain)"),
             ("BM_TemplatePlain", "the template without fragments (render, then tokenize)")]
    if any((p, None) not in render for p, _ in paths):
        sys.exit(f"{render_json} lacks one of {', '.join(p for p, _ in paths)}")
    base = to_us(render[("BM_TemplateFragments", None)])
    md.append("**Rendering an OHLCV object record through `{t},O={o},H={h},L={l},C={c},V={v}` and tokenizing "
              "it**" + (f" (the tokenizer of `{os.path.basename(model.group(1))}`, {model.group(2)})" if model else ""))
    md.append("")
    md.append("| path | µs per record (CPU) | against fragments |")
    md.append("|---|---:|---:|")
    for p, label in paths:
        us = to_us(render[(p, None)])
        md.append(f"| {label} | {fmt(us, 2)} | {fmt(us / base, 1)}x |")
    if choice:
        md.append("")
        md.append(f"What the renderer chose when it was built, from its own quick timing: {choice.group(1)}")
    md.append("")

    # The ring: ns per record pushed (manual time around the pushes only).
    lf, mx = "BM_{}<LockFreeRing>", "BM_{}<MutexDequeRing>"
    caps = sorted({c for (f, c) in ring if f.startswith("BM_PushNoConsumer") and c is not None})

    def cell(fn, counter, caps_, text=ns_text):
        vals = []
        for c in caps_:
            e = ring.get((fn, c))
            vals.append(text(e[counter]) if e and counter in e else "-")
        return " / ".join(vals)

    alone_caps = sorted({c for (f, c) in ring if f.startswith("BM_PushAloneNoDrop") and c is not None})
    capl = " / ".join(str(c) for c in caps)
    md.append("**Pushing a record (a sequence number and 60 bytes of text, moved in)**")
    md.append("")
    md.append("| push, ns per record | lock-free ring | mutex + deque (for comparison) |")
    md.append("|---|---:|---:|")
    md.append(f"| no consumer, no drops (capacity {' / '.join(str(c) for c in alone_caps)}) | "
              f"{cell(lf.format('PushAloneNoDrop'), 'ns_per_record', alone_caps)} | "
              f"{cell(mx.format('PushAloneNoDrop'), 'ns_per_record', alone_caps)} |")
    md.append(f"| no consumer, ring full: every push drops the oldest (capacity {capl}) | "
              f"{cell(lf.format('PushNoConsumer'), 'ns_per_record', caps)} | "
              f"{cell(mx.format('PushNoConsumer'), 'ns_per_record', caps)} |")
    md.append(f"| a consumer draining at once on another thread (capacity {capl}) | "
              f"{cell(lf.format('PushWithConsumer'), 'ns_per_record', caps)} | "
              f"{cell(mx.format('PushWithConsumer'), 'ns_per_record', caps)} |")
    md.append("")
    mrec = lambda x: fmt(x / 1e6, 1 if x >= 1e6 else 2)  # noqa: E731
    drops = lambda x: fmt(x, 2)  # noqa: E731
    md.append("| producer and consumer on two threads | lock-free ring | mutex + deque |")
    md.append("|---|---:|---:|")
    md.append(f"| delivered, M records/s (capacity {capl}) | "
              f"{cell(lf.format('Throughput'), 'delivered_per_second', caps, mrec)} | "
              f"{cell(mx.format('Throughput'), 'delivered_per_second', caps, mrec)} |")
    md.append(f"| dropped per record pushed (capacity {capl}) | "
              f"{cell(lf.format('Throughput'), 'drops_per_record', caps, drops)} | "
              f"{cell(mx.format('Throughput'), 'drops_per_record', caps, drops)} |")

    text = "\n".join(md) + "\n"
    sys.stdout.write(text)
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
