#!/usr/bin/env python3
"""The stateless benchmark's tables, from the files bench/stateless/run.sh writes (settings.json and
results/*.json), with the targets next to the measured figures. Prints markdown naming the commit (run.sh saves
it as OUT_DIR/summary.md; bench/update_docs.py stateless OUT_DIR/summary.md puts it into the docs).

    bench/stateless/report.py OUT_DIR
"""
import glob
import json
import os
import sys

# bench/benchlib.py: what the benchmark scripts share (no bytecode left beside it in the tree).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import benchlib  # noqa: E402

AOI, LLAMA = "aoi", "llama-server"


def load(path):
    with open(path) as f:
        return json.load(f)


def fmt(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def ratio(a, b):
    return a / b if a is not None and b else None


def med(values):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def results(out):
    r = {}
    for p in glob.glob(os.path.join(out, "results", "*.json")):
        d = load(p)
        r[(d["scenario"], d["system"], d.get("config", ""))] = d
    return r


def load_note(s):
    """The 1-minute load average at the start and the end of the run (a machine doing other work is noisy)."""
    end = None
    try:
        with open(os.path.join(s["out"], "load_end")) as f:
            end = f.read().strip()
    except OSError:
        pass
    if not s.get("load_start"):
        return ""
    return (f" Load average (1 min) at the start of the run {s['load_start']}" +
            (f", at its end {end} (the servers' own {s['threads']} threads included)" if end else "") +
            f", on {os.cpu_count()} cores.")


def header(s):
    lines = [benchlib.measured_of(s, "bench/stateless/run.sh"),
             "",
             f"Model {os.path.basename(s['model'])}; the copy scenario's: {os.path.basename(s['copy_model'])}"
             + (f" ({s['copy_note']})" if s.get("copy_note") else "") + ". "
             f"Engine settings, both servers: {s['settings']}; {s['slots']} completion slots of "
             f"{s['cells_per_slot']} KV cells each (aoi `--pool-slots {s['slots']}`, one sequence each; llama-server "
             f"`-np {s['slots']}`, `-c {s['slots'] * s['cells_per_slot']}`, a slot each, no unified KV cache). "
             f"Every request greedy (temperature 0), streamed with its usage, `cache_prompt` at its default; "
             f"a fresh server per system and scenario, one running at a time, warm-up requests of their own first; "
             f"{s['repeats']} timed runs of each measurement, the median kept. {benchlib.NOISE_RULE}" + load_note(s),
             ""]
    has = s.get("aoi_has", {})
    missing = ", ".join(f"`{f}`" for f, ok in has.items() if not ok)
    line = f"- aoi: `aoi {s['aoi_args']}`; prefix cache, response cache and drafting at their defaults"
    if s.get("aoi_draft_on"):
        line += f", except the copy scenario's `{s['aoi_draft_on']}` (drafting on) and `{s['aoi_draft_off']}` (off)"
    if missing:
        line += f"; this build has no {missing}" + ("" if s.get("aoi_draft_on") else
                                                   ": its copy scenario runs without drafting")
    lines.append(line + ".")
    if s.get("llama"):
        given = any(f in s["llama_args"].split() for f in ("--cache-ram", "-cram"))
        cache_ram = "`--cache-ram` as given above" if given else "`--cache-ram` left at its default, 8192 MiB"
        lines.append(f"- llama-server ({s['llama_version']}): `llama-server -m MODEL {s['llama_args']}`; its prompt "
                     f"cache on (each slot keeps its last prompt; {cache_ram}); "
                     f"drafting for the copy scenario: `{s['llama_spec']}` (none otherwise).")
    lines.append("")
    return lines


def multiturn(s, r):
    a, l = r.get(("multiturn", AOI, "")), r.get(("multiturn", LLAMA, ""))
    if not a and not l:
        return [], {}
    some = a or l
    turns = some["turns"]
    lines = [f"#### Multi-turn chat (one client, {turns} turns, {some['max_tokens']} answer tokens each)", "",
             "Each turn sends the whole conversation so far; median per turn over the runs (ms to the last token; "
             "first token; prompt tokens the server reported as cached).", "",
             "| turn | prompt tokens | aoi ms | aoi first token ms | aoi cached | llama-server ms "
             "| llama-server first token ms | llama-server cached | aoi / llama-server |",
             "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def runs(d, t, key):
        return [rep["turns"][t][key] for rep in d["repeats"]] if d else []

    def col(d, t, key):
        return med(runs(d, t, key))

    lower = equal = higher = 0
    ratios = []
    for t in range(turns):
        am, lm = col(a, t, "ms"), col(l, t, "ms")
        rt = ratio(am, lm)
        if rt is not None:
            ratios.append(rt)
            if benchlib.within_noise(runs(a, t, "ms"), runs(l, t, "ms")):
                equal += 1
            elif rt <= 1.0:
                lower += 1
            else:
                higher += 1
        shown = benchlib.ratio_text(runs(a, t, "ms"), runs(l, t, "ms")) if rt is not None else "-"
        lines.append(f"| {t + 1} | {fmt(col(some, t, 'prompt_tokens'))} | {fmt(am)} | {fmt(col(a, t, 'ttft_ms'))} "
                     f"| {fmt(col(a, t, 'cached_tokens'))} | {fmt(lm)} | {fmt(col(l, t, 'ttft_ms'))} "
                     f"| {fmt(col(l, t, 'cached_tokens'))} | {shown} |")
    if a and l:
        same = total = 0
        for ra, rl in zip(a["repeats"], l["repeats"]):
            for ta, tl in zip(ra["turns"], rl["turns"]):
                if "text" in ta and "text" in tl:
                    total += 1
                    same += ta["text"] == tl["text"]
        if total:
            lines += ["", f"The same answer from both servers in {same}/{total} turns (greedy; a conversation goes on "
                          "with each server's own answers)."]
    checks = {}
    if ratios:
        mean = sum(ratios) / len(ratios)
        checks["multiturn"] = ("multi-turn: per-turn latency <= llama-server's", higher == 0,
                               f"of {len(ratios)} turns {lower} lower, {equal} equal within noise, {higher} higher; "
                               f"aoi / llama-server {min(ratios):.2f}x to {max(ratios):.2f}x, mean {mean:.2f}x")
    lines.append("")
    return lines, checks


def shared(s, r):
    a, l = r.get(("shared", AOI, "")), r.get(("shared", LLAMA, ""))
    if not a and not l:
        return [], {}
    some = a or l
    lines = [f"#### Shared system prompt ({some['clients']} clients, a system prompt of about "
             f"{fmt(some.get('system_tokens_approx'))} prompt tokens with the question, {some['rounds']} requests "
             f"per client, {some['max_tokens']} answer tokens each)", "",
             "Round 1: every client's first request, sent at once, nothing of the system prompt cached anywhere; "
             "then every client sends the rest back to back. Throughput over each phase's wall time; latency per "
             "request; cached: the share of prompt tokens the server reported as cached.", "",
             "| phase | requests | aoi tokens/s | llama-server tokens/s | aoi / llama-server | aoi requests/s "
             "| llama-server requests/s | aoi p50 / p99 ms | llama-server p50 / p99 ms | cached aoi / llama-server |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]

    def runs(d, phase, key):
        return [rep[phase][key] for rep in d["repeats"] if rep.get(phase)] if d else []

    def m(d, phase, key):
        return med(runs(d, phase, key))

    def cached(d, phase):
        if not d:
            return "-"
        c = med([rep[phase]["cached_tokens"] / rep[phase]["prompt_tokens"] for rep in d["repeats"]
                 if rep.get(phase) and rep[phase]["cached_tokens"] is not None and rep[phase]["prompt_tokens"]])
        return "-" if c is None else f"{100 * c:.0f}%"

    checks = {}
    names = {"cold": "round 1 (cold)", "warm": "later rounds", "whole": "whole run"}
    for phase in ("cold", "warm", "whole"):
        if not any(rep.get(phase) for rep in some["repeats"]):
            continue
        at, lt = m(a, phase, "tokens_per_s"), m(l, phase, "tokens_per_s")
        lines.append(f"| {names[phase]} | {fmt(m(some, phase, 'requests'))} | {fmt(at, 1)} | {fmt(lt, 1)} "
                     f"| {benchlib.ratio_text(runs(a, phase, 'tokens_per_s'), runs(l, phase, 'tokens_per_s'))} "
                     f"| {fmt(m(a, phase, 'requests_per_s'), 2)} "
                     f"| {fmt(m(l, phase, 'requests_per_s'), 2)} "
                     f"| {fmt(m(a, phase, 'p50_ms'))} / {fmt(m(a, phase, 'p99_ms'))} "
                     f"| {fmt(m(l, phase, 'p50_ms'))} / {fmt(m(l, phase, 'p99_ms'))} | {cached(a, phase)} / "
                     f"{cached(l, phase)} |")
        if phase == "whole" and ratio(at, lt) is not None:
            rt = ratio(at, lt)
            checks["shared"] = ("shared system prompt: throughput >= 1.5x llama-server's", rt >= 1.5,
                                f"{rt:.2f}x ({at:.1f} against {lt:.1f} completion tokens/s)")
    lines.append("")
    return lines, checks


def copy(s, r):
    rows = {k: v for k, v in r.items() if k[0] == "copy"}
    if not rows:
        return [], {}
    some = next(iter(rows.values()))
    lines = [f"#### Copy-heavy answers (a passage of {some['lines']} lines, {some['max_tokens']} answer tokens at "
             "most, to be repeated exactly)", "",
             "Tokens/s: completion tokens over the wall time of all requests (end to end, prefill included); decode: "
             "per request, the tokens after the first over the time they took (median). Acceptance: drafted tokens "
             "the model accepted, from the server's counters (llama-server's `timings`, aoi's response or "
             "`/metrics`); copied: answers that reproduce their passage exactly (mean share reproduced).", "",
             "| clients | system | drafting | tokens/s | decode tokens/s | accepted / drafted | copied "
             "| with / without drafting |",
             "|---:|---|---|---:|---:|---:|---:|---:|"]

    def runs(d, key):
        return [rep[key] for rep in d["repeats"]] if d else []

    def m(d, key):
        return med(runs(d, key))

    def acc(d):
        if not d:
            return "-"
        a = sum(rep["accepted"] or 0 for rep in d["repeats"])
        n = sum(rep["drafted"] or 0 for rep in d["repeats"])
        if all(rep["drafted"] is None for rep in d["repeats"]):
            return "no counter"
        return f"{a:.0f} / {n:.0f} ({100 * a / n:.0f}%)" if n else "0 drafted"

    # (clients, system) -> the runs' tokens/s without drafting and with it
    checks, tps = {}, {}
    for n in sorted({int(k[2].split("-")[0][1:]) for k in rows}):
        for system in (AOI, LLAMA):
            off = rows.get(("copy", system, f"x{n}-nodraft"))
            on = rows.get(("copy", system, f"x{n}-draft"))
            if not off and not on:
                continue
            tps[(n, system)] = (runs(off, "tokens_per_s"), runs(on, "tokens_per_s"))
            for label, d in (("off", off), ("on", on)):
                if d is None:
                    lines.append(f"| {n} | {system} | {label} | n/a | | | | |")
                    continue
                copied = sum(rep["copied"] for rep in d["repeats"])
                total = sum(rep["requests"] for rep in d["repeats"])
                fid = med([rep["fidelity_mean"] for rep in d["repeats"]])
                off_runs, on_runs = tps[(n, system)]
                lines.append(f"| {n} | {system} | {label} | {fmt(m(d, 'tokens_per_s'), 1)} "
                             f"| {fmt(m(d, 'decode_tps_p50'), 1)} | {acc(d) if label == 'on' else '-'} "
                             f"| {copied}/{total} ({fmt(fid, 2)}) "
                             f"| {benchlib.ratio_text(on_runs, off_runs) if label == 'on' else ''} |")
        if (n, AOI) in tps and (n, LLAMA) in tps:
            (ao, an), (lo, ln) = tps[(n, AOI)], tps[(n, LLAMA)]
            lines.append(f"| {n} | aoi / llama-server | | without {benchlib.ratio_text(ao, lo)}, with "
                         f"{benchlib.ratio_text(an, ln)} | | | | |")
    lines.append("")
    if (1, AOI) in tps:
        off_t, on_t = (med(x) for x in tps[(1, AOI)])
        rt = ratio(on_t, off_t)
        checks["copy1"] = ("copy-heavy, 1 client: aoi's tokens/s with drafting >= 1.5x without",
                           None if rt is None else rt >= 1.5,
                           "aoi has no drafting to turn on" if rt is None else
                           f"{rt:.2f}x ({on_t:.1f} against {off_t:.1f} tokens/s)")
    big = max((n for n, sysname in tps if sysname == AOI and n > 1), default=None)
    if big:
        off_runs, on_runs = tps[(big, AOI)]
        off_t, on_t = med(off_runs), med(on_runs)
        rt = ratio(on_t, off_t)
        noise = rt is not None and benchlib.within_noise(on_runs, off_runs)
        checks["copy8"] = (f"copy-heavy, {big} clients: aoi with drafting never slower than without",
                           None if rt is None else rt >= 1.0 or noise,
                           "aoi has no drafting to turn on" if rt is None else
                           f"{benchlib.EQUAL}: {on_t:.1f} against {off_t:.1f} tokens/s" if noise else
                           f"{rt:.2f}x ({on_t:.1f} against {off_t:.1f} tokens/s)")
    return lines, checks


def response_cache(s, r):
    a = r.get(("response-cache", AOI, ""))
    if not a:
        return []
    first_runs = [rep["first_ms"] for rep in a["repeats"]]
    again_runs = [rep["repeat_ms"] for rep in a["repeats"]]
    first, again = med(first_runs), med(again_runs)
    same = sum(rep["same_text"] for rep in a["repeats"])
    speed = benchlib.faster_text(again_runs, first_runs)
    return ["#### Response cache (aoi)", "",
            f"The same request twice ({a['max_tokens']} answer tokens, not streamed): first {fmt(first, 1)} ms, "
            f"the repeat {fmt(again, 2)} ms ({speed}); the same answer in {same}/{len(a['repeats'])} runs.", ""]


def report(out):
    s = load(os.path.join(out, "settings.json"))
    s["out"] = out
    r = results(out)
    lines = header(s)
    checks = {}
    for fn in (multiturn, shared, copy):
        part, c = fn(s, r)
        lines += part
        checks.update(c)
    lines += response_cache(s, r)
    if checks:
        lines += ["#### Targets", "", "| target | met | measured |", "|---|---|---|"]
        for name, ok, measured in checks.values():
            met = "not measured" if ok is None else "yes" if ok else "**no**"
            lines.append(f"| {name} | {met} | {measured} |")
        lines.append("")
    return "\n".join(lines)


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    print(report(sys.argv[1]), end="")


if __name__ == "__main__":
    main()
