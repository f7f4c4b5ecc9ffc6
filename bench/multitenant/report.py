#!/usr/bin/env python3
"""The multi-tenant benchmark's table, from the files bench/multitenant/run.sh writes (settings.json,
llama-bench.json, results-N.json), with the targets checked against the figures. Prints markdown (run.sh
saves it as OUT_DIR/report.md; bench/update_docs.py multitenant OUT_DIR/report.md puts it into the docs).

    bench/multitenant/report.py OUT_DIR
"""
import glob
import json
import os
import sys

# bench/benchlib.py: what the benchmark scripts share (no bytecode left beside it in the tree).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import benchlib  # noqa: E402


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def compared(num_runs, den_runs, recorded=None, center=benchlib.median):
    """The ratio of two measurements (their runs) in parentheses, or `, equal (within noise)`; results written
    before the runs were kept give their recorded ratio, marked."""
    if num_runs is None or den_runs is None:
        return f" ({fmt(recorded, 2)}x, spread not recorded)"
    return benchlib.ratio_note(num_runs, den_runs, 2, center)


def header(s, raw_depth, raw_tps):
    """The commit and the exact command, then the engine settings both servers ran with."""
    engine = ""
    if s.get("aoi_engine_args"):
        engine = (f" aoi `serve {s['aoi_engine_args']}`; llama-server `{s['llama_engine_args']}`, a slot per "
                  "session (`-np N`), its prompt cache on (each slot keeps its last prompt) and its host-memory "
                  "prompt cache off (`--cache-ram 0`).")
    return [benchlib.measured_of(s, "bench/multitenant/run.sh"), "",
            f"{os.path.basename(s['model'])}, {s['threads']} threads (decode and prefill), batch and ubatch "
            f"{s['batch']}, flash attention {s['flash_attn']} and KV cache {s['kv_type']} on both servers."
            f"{engine} Sessions of {s['tokens']} tokens of bars; questions of {s['answer_tokens']} answer tokens; "
            f"{s['bars_per_iteration']} new bars per stream before each round against llama-server; median of "
            f"repeated measurements, each system timed alone and warmed up. llama.cpp's prefill: llama-bench "
            f"pp{s['batch']} at depth {raw_depth}: {fmt(raw_tps)} tokens/s. " + benchlib.NOISE_RULE, ""]


def report(out):
    s = load(os.path.join(out, "settings.json"))
    bench = load(os.path.join(out, "llama-bench.json"))
    raw_tps = bench[0]["avg_ts"] if bench else None
    raw_depth = bench[0].get("n_depth", 0) if bench else 0
    rows = sorted((load(p) for p in glob.glob(os.path.join(out, "results-*.json"))),
                  key=lambda r: (r["sessions"], r.get("budget_ms", -1)))
    alone = next((r for r in rows if r["sessions"] == 1), None)
    alone_p50 = alone["idle"]["p50_ms"] if alone else None

    lines = header(s, raw_depth, raw_tps)
    lines.append("| N | ingestion tok/s (vs llama.cpp prefill) | N questions at once / in a row, ms (speedup) "
                 "| question beside N-1 idle neighbours, p50 ms (vs alone) "
                 "| question while N-1 ingest, p50 / p99 ms (bound: idle p50 + longest pass) "
                 "| least versions per ingesting neighbour (passes) "
                 "| flash rounds together / one after another, ms (speedup) "
                 "| aoi / llama-server -np N, mean ms (speedup) |")
    lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        n = r["sessions"]
        ing = r["ingest"]
        ratio = ing["tokens_per_s"] / raw_tps if raw_tps else None
        b = r["batch"]
        idle = r["idle"]
        vs_alone = ("" if not alone else " (1.00x)" if r is alone else
                    compared(idle["ms"], alone["idle"]["ms"]))
        ld = r["loaded"]
        bound = idle["p50_ms"] + ld["longest_pass_ms"]
        least = ld.get("least_versions_per_neighbour")
        fl = r["flash"]
        ll = r.get("llama")
        llama_cell = (f"{fmt(ll['aoi_mean_ms'])} / {fmt(ll['llama_mean_ms'])}"
                      f"{compared(ll.get('llama_ms'), ll.get('aoi_ms'), ll['speedup'], benchlib.mean)}" if ll else "-")
        budget = f" (budget {fmt(r['budget_ms'])} ms)" if "budget_ms" in r else ""
        lines.append(
            f"| {n}{budget} | {fmt(ing['tokens_per_s'])} ({fmt(ratio, 2)}x) "
            f"| {fmt(b['at_once_ms'])} / {fmt(b['in_a_row_ms'])}"
            f"{compared(b.get('in_a_row_runs_ms'), b.get('at_once_runs_ms'), b['speedup'])} "
            f"| {fmt(idle['p50_ms'])}{vs_alone} "
            f"| {fmt(ld['p50_ms'])} / {fmt(ld['p99_ms'])} ({fmt(bound)}) "
            f"| {'-' if least is None else least} ({fmt(ld['passes'])}) "
            f"| {fmt(fl['together_ms'])} / {fmt(fl['separately_ms'])}"
            f"{compared(fl.get('separately_runs_ms'), fl.get('together_runs_ms'), fl['speedup'])} "
            f"| {llama_cell} |")

    if any("budget_ms" in r for r in rows):
        lines.append("")
        lines.append("| N | budget ms | question while N-1 ingest (back to back), p50 / p99 ms | idle p50 ms "
                     "| longest pass ms | passes cut by the budget | neighbours' ingestion meanwhile, tok/s "
                     "| all ingesting at once, tok/s | question every few s while N-1 ingest, p50 / p99 ms "
                     "| neighbours' ingestion then, tok/s | neighbours' ingestion, no question, tok/s |")
        lines.append("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in rows:
            if "budget_ms" not in r:
                continue
            ld = r["loaded"]
            su = r.get("sustained")
            if su:
                a, q = su["asking"], su["quiet"]
                sustained = (f"{fmt(a['p50_ms'])} / {fmt(a['p99_ms'])} ({a['questions']}, one every "
                             f"{fmt(su['question_gap_ms'] / 1000, 1)} s) | {fmt(a['neighbour_tokens_per_s'])} "
                             f"| {fmt(q['neighbour_tokens_per_s'])}")
            else:
                sustained = "- | - | -"
            lines.append(f"| {r['sessions']} | {fmt(r['budget_ms'])} | {fmt(ld['p50_ms'])} / {fmt(ld['p99_ms'])} "
                         f"| {fmt(r['idle']['p50_ms'])} | {fmt(ld['longest_pass_ms'])} "
                         f"| {fmt(ld.get('budgeted_passes', 0))} | {fmt(ld.get('neighbour_tokens_per_s', 0))} "
                         f"| {fmt(r['ingest']['tokens_per_s'])} | {sustained} |")

    # The targets, as the issue states them, against the figures above.
    def row(n):
        return next((r for r in rows if r["sessions"] == n), None)

    checks = []
    eights = [r for r in rows if r["sessions"] == 8]
    # With budgets compared, the targets are checked on the largest budget; the run without one is the control.
    budgeted = [r for r in eights if r.get("budget_ms", 0) > 0]
    unbudgeted = next((r for r in eights if r.get("budget_ms") == 0), None)
    r8 = budgeted[-1] if budgeted else row(8)
    if r8:
        sp = r8["batch"]["speedup"]
        checks.append(("8 questions at once >= 2.5x faster than in a row", sp >= 2.5, f"{sp:.2f}x"))
        ing = r8["ingest"]["tokens_per_s"] / raw_tps if raw_tps else 0
        checks.append(("aggregate ingestion with 8 sessions >= 0.9x llama.cpp's prefill", ing >= 0.9, f"{ing:.2f}x"))
        ld = r8["loaded"]
        bound = r8["idle"]["p50_ms"] + ld["longest_pass_ms"]
        checks.append(("question p99 while 7 neighbours ingest <= idle + one pass", ld["p99_ms"] <= bound,
                       f"{ld['p99_ms']:.0f} ms against {bound:.0f} ms; every neighbour gained >= "
                       f"{ld.get('least_versions_per_neighbour')} versions in {ld['passes']:.0f} passes"))
        if "budget_ms" in r8:
            b = r8["budget_ms"]
            bound = r8["idle"]["p50_ms"] + 1.5 * b
            checks.append((f"question p99 while 7 neighbours ingest <= idle p50 + 1.5 x the budget ({fmt(b)} ms)",
                           ld["p99_ms"] <= bound, f"{ld['p99_ms']:.0f} ms against {bound:.0f} ms"))
            if unbudgeted:
                a, z = r8["ingest"]["tokens_per_s"], unbudgeted["ingest"]["tokens_per_s"]
                checks.append(("all 8 ingesting at once, no question asked, with the budget = without (within 10%)",
                               abs(a / z - 1) <= 0.1, f"{a / z:.2f}x ({a:.0f} against {z:.0f} tokens/s)"))
            su, su0 = r8.get("sustained"), unbudgeted.get("sustained") if unbudgeted else None
            if su:
                a = su["asking"]
                bound = r8["idle"]["p50_ms"] + 1.5 * b
                checks.append((f"question p99 with one every {fmt(su['question_gap_ms'] / 1000, 1)} s while 7 "
                               f"neighbours ingest <= idle p50 + 1.5 x the budget", a["p99_ms"] <= bound,
                               f"{a['p99_ms']:.0f} ms against {bound:.0f} ms"))
            if su and su0:
                for part, name, ok in (("asking", f"while a question arrives every "
                                                  f"{fmt(su['question_gap_ms'] / 1000, 1)} s, with the budget "
                                                  ">= 0.8x without", lambda x: x >= 0.8),
                                       ("quiet", "with no question asked, with the budget = without (within 10%)",
                                        lambda x: abs(x - 1) <= 0.1)):
                    w, z = su[part]["neighbour_tokens_per_s"], su0[part]["neighbour_tokens_per_s"]
                    checks.append((f"neighbours' ingestion {name}", ok(w / z),
                                   f"{w / z:.2f}x ({w:.0f} against {z:.0f} tokens/s)"))
        if r8.get("llama"):
            sp = r8["llama"]["speedup"]
            checks.append(("aoi against llama-server -np 8, mean question latency >= 10x lower", sp >= 10,
                           f"{sp:.1f}x"))
    # The target names 4 idle neighbours of 8K tokens; the largest N measured has at least as many cells idle.
    big = rows[-1] if rows else None
    if big and alone_p50 and big["sessions"] > 1:
        ratio = big["idle"]["p50_ms"] / alone_p50
        checks.append((f"question beside {big['sessions'] - 1} idle neighbours of {s['tokens']} tokens <= 1.3x alone",
                       ratio <= 1.3, f"{ratio:.2f}x"))
    if checks:
        lines.append("")
        lines.append("| target | met | measured |")
        lines.append("|---|---|---|")
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
