#!/usr/bin/env python3
"""The KV cache table from bench/kv/run.sh's output folder (kv-*.json, one per setting, and kv-*-naive.json where
the answers were recomputed): bytes a token and sessions a GiB holds against F16, ingestion, the question's
latency at each checkpoint, and whether the recomputed answers are the same tokens.

    bench/kv/report.py DIR
"""
import json
import pathlib
import sys

ORDER = ["f16-f16-fa-off", "f16-f16-fa-on", "q8_0-f16-fa-off", "q8_0-q8_0-fa-on", "q4_0-q4_0-fa-on"]


def fmt(x, digits=0):
    return f"{x:,.{digits}f}"


def report(folder):
    d = pathlib.Path(folder)
    runs = {}
    for name in ORDER:
        f = d / f"kv-{name}.json"
        if f.exists():
            runs[name] = json.loads(f.read_text())
    if not runs:
        sys.exit(f"no kv-*.json in {folder}")
    first = next(iter(runs.values()))
    base = runs.get("f16-f16-fa-off", first)
    settings = base["settings"].split(", KV cache")[0]
    lines = [f"Measured at commit `{first['commit']}`: `{first['command']}`", "",
             f"`aoi replay`, stateful mode, once per setting, one after another: {settings}; each question timed "
             f"{first['repeats']} times at each checkpoint on the same state, the median kept. Sessions a GiB holds: "
             "GiB / (KV bytes a token x 8,192 tokens), the KV cache alone. \"Same as recomputed\": the answers of "
             "naive mode (the whole retained context decoded again, with the same cache type), token for token, "
             "at each checkpoint; \"-\" where it was not run.", ""]
    depths = [c["context_tokens"] for c in base["checkpoints"]]
    head = "| K | V | flash attention | KV bytes a token | sessions of 8K tokens a GiB (vs f16) | ingestion tok/s "
    head += "".join(f"| question at {fmt(t)} tokens, ms " for t in depths) + "| same as recomputed |"
    lines += [head, "|---|---|---|---:|---:|---:|" + "---:|" * len(depths) + "---|"]
    for name, r in runs.items():
        per = 2**30 / (r["kv_bytes_per_token"] * 8192)
        base_per = 2**30 / (base["kv_bytes_per_token"] * 8192)
        cells = "".join(f"| {fmt(c['stateful']['ms'])} " for c in r["checkpoints"])
        naive = d / f"kv-{name}-naive.json"
        same = "-"
        if naive.exists():
            n = json.loads(naive.read_text())
            same = ", ".join("yes" if a["stateful"]["tokens"] == b["naive"]["tokens"] else "**no**"
                             for a, b in zip(r["checkpoints"], n["checkpoints"]))
        ingest = r["ingest_tokens_per_s"]
        lines.append(f"| {r['cache_type_k']} | {r['cache_type_v']} | {'on' if r['flash_attn'] else 'off'} "
                     f"| {fmt(r['kv_bytes_per_token'])} | {fmt(per, 1)} ({per / base_per:.2f}x) "
                     f"| {fmt(ingest) if ingest else '-'} {cells}| {same} |")
    return "\n".join(lines) + "\n"


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print(report(sys.argv[1]), end="")


if __name__ == "__main__":
    main()
