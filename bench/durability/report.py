#!/usr/bin/env python3
"""The durability benchmark's tables, from what bench/durability/run.sh writes (settings.json, results-*.json,
restart-times.json), with the targets checked against the figures. Prints markdown (run.sh saves it as
OUT_DIR/report.md; bench/update_docs.py durability OUT_DIR/report.md puts it into the docs).

    bench/durability/report.py OUT_DIR
"""
import json
import os
import sys

# bench/benchlib.py: what the benchmark scripts share (no bytecode left beside it in the tree).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import benchlib  # noqa: E402


def load(out, name):
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def report(out):
    s = load(out, "settings.json")
    engine = ""
    if s.get("aoi_engine_args"):
        engine = f" aoi `serve {s['aoi_engine_args']}`; llama-server `{s['llama_engine_args']}`."
    lines = [benchlib.measured_of(s, "bench/durability/run.sh"), "",
             f"{os.path.basename(s['model'])}, {s['threads']} threads (decode and prefill), batch and ubatch "
             f"{s['batch']}, flash attention {s['flash_attn']} and KV cache {s['kv_type']} on both servers;{engine} "
             f"Snapshots: medians of {s['reps']} after a warm-up, one server timed at a time; the restart and each "
             f"push policy's ingestion: one run each. " + benchlib.NOISE_RULE, ""]
    checks = []

    snap = load(out, "results-snapshot.json") or []
    if snap:
        lines += ["| tokens | aoi snapshot MB (bytes/token) | aoi copy + write ms | aoi restore ms "
                  "| llama-server slot MB (bytes/token) | llama-server save ms | llama-server restore ms |",
                  "|---:|---:|---:|---:|---:|---:|---:|"]
        for r in snap:
            a, l = r["aoi"], r["llama"]
            lines.append(f"| {r['tokens']:,} | {a['bytes'] / 1e6:.1f} ({a['bytes_per_token']:,.0f}) "
                         f"| {a['copy_ms']:.0f} + {a['write_ms']:.0f} | {a['load_ms']:.0f} "
                         f"| {l['bytes'] / 1e6:.1f} ({l['bytes_per_token']:,.0f}) | {l['save_ms']:.0f} "
                         f"| {l['restore_ms']:.0f} |")
        worst = max(r["aoi"]["bytes_per_token"] / r["llama"]["bytes_per_token"] for r in snap
                    if r["llama"]["bytes_per_token"] > 0)
        checks.append(("snapshot bytes per token <= llama-server's", worst <= 1.0, f"{worst:.3f}x at worst"))
        lines.append("")

    fill, restart = load(out, "results-fill.json"), load(out, "restart-times.json")
    answer = load(out, "results-answer.json")
    if fill and restart and answer:
        per = fill["tokens"] / fill["sessions"]
        lines += ["| sessions x tokens | re-ingest until all answer, s | restart until all answer, s "
                  "(process ready, s) | speedup |", "|---:|---:|---:|---:|"]
        speed = fill["seconds"] / restart["all_answering_s"]
        lines.append(f"| {fill['sessions']} x {per:,.0f} | {fill['seconds']:.1f} | {restart['all_answering_s']:.1f} "
                     f"({restart['ready_s']:.1f}) "
                     f"| {benchlib.ratio_text(fill['seconds'], restart['all_answering_s'], 1)} |")
        checks.append(("restore of the sessions >= 20x faster than re-ingesting them", speed >= 20, f"{speed:.1f}x"))
        lines.append("")

    pushes = {p: load(out, f"results-push-{p}.json") for p in ["always", "everysec", "no", "memory"]}
    if any(pushes.values()):
        lines += ["| fsync | push p50 ms | p90 ms | p99 ms | ingestion tokens/s (vs memory only) |",
                  "|---|---:|---:|---:|---:|"]
        base = pushes["memory"]["ingest_tokens_per_s"] if pushes["memory"] else None
        for p, r in pushes.items():
            if not r:
                continue
            ratio = benchlib.ratio_note(r["ingest_tokens_per_s"], base) if base and p != "memory" else ""
            name = "memory only" if p == "memory" else p
            lines.append(f"| {name} | {r['p50_ms']:.3f} | {r['p90_ms']:.3f} | {r['p99_ms']:.3f} "
                         f"| {r['ingest_tokens_per_s']:,.0f}{ratio} |")
        if pushes["everysec"]:
            p50 = pushes["everysec"]["p50_ms"]
            checks.append(("push p50 over HTTP < 1 ms with everysec", p50 < 1, f"{p50:.3f} ms"))
            if base:
                ratio = pushes["everysec"]["ingest_tokens_per_s"] / base
                checks.append(("ingestion rate within 5% of no data directory (everysec)", ratio >= 0.95,
                               f"{ratio:.3f}x"))
        lines.append("")

    if checks:
        lines += ["| target | met | measured |", "|---|---|---|"]
        for name, ok, measured in checks:
            lines.append(f"| {name} | {'yes' if ok else '**no**'} | {measured} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print(report(sys.argv[1]), end="")


if __name__ == "__main__":
    main()
