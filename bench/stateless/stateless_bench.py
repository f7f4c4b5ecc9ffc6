#!/usr/bin/env python3
"""The stateless benchmark's client: one scenario against one server (aoi or llama-server, both through their
OpenAI-compatible /v1/chat/completions), greedy (temperature 0), every request streamed with its usage, so
that each is timed to its first and its last token. bench/stateless/run.sh starts a fresh server for each
system and scenario and runs this; report.py turns the JSON it writes into the tables. Prints; never asserts.

    stateless_bench.py SCENARIO --url URL --system NAME --out FILE [options]

Scenarios (every request differs from every other, warm-up included, unless said otherwise: aoi's response
cache answers a request it has seen without inference):
  multiturn       one client, --turns turns: each sends the whole conversation so far (system, the previous
                  user and assistant messages, a new user message); --repeats conversations, each its own
  shared          --clients clients, one system prompt of about --system-words words shared by all and a
                  question of its own per request; round 1 (every client's first request, sent at once) is
                  cold, no prefix cached anywhere; then every client sends --rounds - 1 more back to back
  copy            --clients clients, each sending --requests requests back to back: a passage of --lines lines
                  (dates, times, prices, sentences) to repeat exactly; generated tokens/s, acceptance of drafts
  response-cache  a request, then the same request again (non-streamed): the repeat's latency

Draft counters: the response's own (llama-server's timings.draft_n / draft_n_accepted; OpenAI's
usage.completion_tokens_details.accepted/rejected_prediction_tokens) and, where the server has /metrics, every
sample whose name holds "draft" (the difference over the timed requests).
"""
import argparse
import http.client
import json
import random
import statistics
import sys
import threading
import time
import urllib.parse

# ---------------------------------------------------------------------------------------------------------
# Text: generated, deterministic from a seed, never the same twice for different seeds.

WORDS = (
    "account address answer apple april arrive balance bank basket battery bicycle blue board book bottle "
    "bridge budget button cable camera candle card carpet castle chair channel cheese circle city clock cloud "
    "coffee copper corner cotton country cream credit crystal customer delivery desk diamond dinner door "
    "engine evening factory farmer feather field figure finger flower forest friday garden glass gold green "
    "guitar hammer harbor helmet honey horse hotel island jacket kettle kitchen ladder lake lamp leather letter "
    "library machine market meadow metal mirror monday morning mountain needle network number ocean office "
    "orange order package paper parcel pencil pepper piano pillow planet pocket river rocket saddle salt "
    "school season shadow shelf silver window winter wood yellow quiet rapid gentle careful early late "
    "bright heavy narrow simple modern ancient local distant northern southern weekly monthly").split()
VERBS = ("ships checks returns delivers repairs updates holds counts moves opens closes prints records sends "
         "stores measures replaces follows confirms cancels").split()
TICKERS = "ACME BOLT CRUX DYNA EPIC FLUX GRID HALO IONX JADE KITE LUMA".split()
NAMES = "Amber Basil Cedar Delta Ember Fjord Garnet Hazel Indigo Juniper Kestrel Linden".split()


def sentence(rng, lo, hi):
    n = rng.randint(lo, hi)
    words = [rng.choice(WORDS) for _ in range(n)]
    words.insert(min(2, len(words)), rng.choice(VERBS))
    return " ".join(words).capitalize()


def chat_system(rng):
    return (f"You are the assistant of {rng.choice(NAMES)} {rng.choice(WORDS).capitalize()} Ltd, order desk "
            f"{rng.randint(100, 999)}. " + " ".join(sentence(rng, 8, 14) + "." for _ in range(5)))


def user_turn(rng, turn):
    return f"Question {turn + 1}: {sentence(rng, 16, 24)}, and what about order {rng.randint(10000, 99999)}?"


def shared_system(rng, words):
    lines = [f"You are the support assistant of {rng.choice(NAMES)} {rng.choice(WORDS).capitalize()} "
             f"(policy book {rng.randint(1000, 9999)}). Answer every customer by these rules."]
    count, i = 0, 1
    while count < words:
        s = sentence(rng, 12, 20)
        if rng.random() < 0.4:
            s += f" within {rng.randint(2, 90)} days, reference {rng.choice(TICKERS)}-{rng.randint(100, 999)}"
        lines.append(f"{i}. {s}.")
        count += len(s.split()) + 1
        i += 1
    return "\n".join(lines)


def shared_question(rng, client, k):
    return f"Customer {client}-{k} (ticket {rng.randint(100000, 999999)}): {sentence(rng, 10, 14)}?"


def passage(rng, lines):
    out = []
    for _ in range(lines):
        out.append(f"2024-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d} {rng.randint(0, 23):02d}:"
                   f"{rng.randint(0, 59):02d}:{rng.randint(0, 59):02d} {rng.choice(TICKERS)} "
                   f"{rng.uniform(1, 999):.2f} USD {sentence(rng, 5, 9)}.")
    return "\n".join(out)


COPY_SYSTEM = "You repeat text exactly as it is given, with nothing before or after it."


def copy_messages(text):
    return [{"role": "system", "content": COPY_SYSTEM},
            {"role": "user", "content": "Repeat the following passage exactly, line by line:\n\n" + text}]


# ---------------------------------------------------------------------------------------------------------
# HTTP: one kept-alive connection per thread.

class Server:
    def __init__(self, url, timeout):
        u = urllib.parse.urlparse(url)
        self.host, self.port, self.timeout = u.hostname, u.port or 80, timeout
        self.local = threading.local()

    def conn(self):
        c = getattr(self.local, "conn", None)
        if c is None:
            c = self.local.conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        return c

    def request(self, method, path, body=None):
        """Returns (status, response) with the response not read yet; reconnects once on a closed one."""
        data = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if data is not None else {}
        for attempt in (0, 1):
            c = self.conn()
            try:
                c.request(method, path, body=data, headers=headers)
                return c.getresponse()
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError,
                    http.client.CannotSendRequest):
                c.close()
                self.local.conn = None
                if attempt:
                    raise

    def get_text(self, path):
        r = self.request("GET", path)
        body = r.read().decode(errors="replace")
        return r.status, body

    def metrics(self, pattern):
        """The samples of /metrics whose name holds one of `pattern`'s words, or None without /metrics."""
        status, body = self.get_text("/metrics")
        if status != 200:
            return None
        out = {}
        for line in body.splitlines():
            if not line or line.startswith("#"):
                continue
            name = line.split("{")[0].split(" ")[0]
            if any(p in name for p in pattern):
                try:
                    out[line.rsplit(" ", 1)[0]] = float(line.rsplit(" ", 1)[1])
                except ValueError:
                    pass
        return out


def die(message):
    print(message, file=sys.stderr)
    sys.exit(1)


def draft_fields(obj, prefix=""):
    """Every numeric field of a response whose name speaks of drafts or predictions, flattened."""
    out = {}
    if isinstance(obj, dict):
        for k, v in obj.items():
            path = f"{prefix}.{k}" if prefix else k
            if isinstance(v, (dict, list)):
                out.update(draft_fields(v, path))
            elif isinstance(v, (int, float)) and not isinstance(v, bool) and \
                    ("draft" in k or "prediction_tokens" in k):
                out[path] = v
    return out


def chat(server, messages, max_tokens, stream=True):
    """One chat completion, timed; streamed with its usage unless stream=False."""
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0}
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    t0 = time.perf_counter()
    r = server.request("POST", "/v1/chat/completions", body)
    if r.status != 200:
        die(f"POST /v1/chat/completions: {r.status} {r.read()[:500]!r}")
    text, usage, extra, t_first, t_last, pieces, has_timings = [], None, {}, None, None, 0, False
    if stream:
        while True:
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            data = line[5:].strip()
            if data == b"[DONE]":
                continue
            obj = json.loads(data)
            now = time.perf_counter()
            for ch in obj.get("choices") or []:
                piece = (ch.get("delta") or {}).get("content")
                if piece:
                    text.append(piece)
                    pieces += 1
                    t_last = now
                    if t_first is None:
                        t_first = now
            if obj.get("usage"):
                usage = obj["usage"]
            has_timings = has_timings or "timings" in obj
            extra.update(draft_fields({k: v for k, v in obj.items() if k != "choices"}))
        r.read()
    else:
        obj = json.loads(r.read())
        t_first = t_last = time.perf_counter()
        text = [obj["choices"][0]["message"].get("content") or ""]
        usage = obj.get("usage")
        has_timings = "timings" in obj
        extra = draft_fields({k: v for k, v in obj.items() if k != "choices"})
    t_end = time.perf_counter()
    usage = usage or {}
    n = usage.get("completion_tokens", 0)
    res = {
        "ms": (t_end - t0) * 1000,
        "ttft_ms": None if t_first is None else (t_first - t0) * 1000,
        "prompt_tokens": usage.get("prompt_tokens"),
        "cached_tokens": (usage.get("prompt_tokens_details") or {}).get("cached_tokens"),
        "completion_tokens": n,
        "pieces": pieces,
        # Decode rate after the first token: the tokens that followed it over the time they took.
        "decode_tps": (n - 1) / (t_last - t_first) if stream and t_first and t_last and t_last > t_first and n > 1
        else None,
        "draft": extra,
        # llama-server's timings name draft_n only when something was drafted: with timings and without it, 0.
        "has_timings": has_timings,
        "text": "".join(text),
    }
    return res


def at_once(n, fn):
    """Runs fn(i) for i in [0, n) on n threads started together; returns the wall time in s."""
    barrier = threading.Barrier(n + 1)
    errors = []

    def run(i):
        barrier.wait()
        try:
            fn(i)
        except BaseException as e:  # noqa: BLE001 -- reported below
            errors.append(e)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return time.perf_counter() - t0


def pct(values, p):
    v = sorted(x for x in values if x is not None)
    if not v:
        return None
    rank = p * (len(v) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (rank - lo)


def med(values):
    return pct(values, 0.5)


def strip(res):
    return {k: v for k, v in res.items() if k != "text"}


def fmt(x, digits=0):
    return "-" if x is None else f"{x:,.{digits}f}"


def sum_cached(rows):
    vals = [r["cached_tokens"] for r in rows if r["cached_tokens"] is not None]
    return sum(vals) if vals else None


# ---------------------------------------------------------------------------------------------------------
# Scenarios

def multiturn(server, a):
    # Warm-up: a conversation of its own, two turns.
    rng = random.Random(a.seed * 1000 + 999)
    msgs = [{"role": "system", "content": chat_system(rng)}]
    for t in range(2):
        msgs.append({"role": "user", "content": user_turn(rng, t)})
        msgs.append({"role": "assistant", "content": chat(server, msgs, a.max_tokens)["text"]})
    repeats = []
    for rep in range(a.repeats):
        rng = random.Random(a.seed * 1000 + rep)
        msgs = [{"role": "system", "content": chat_system(rng)}]
        turns = []
        for t in range(a.turns):
            msgs.append({"role": "user", "content": user_turn(rng, t)})
            res = chat(server, msgs, a.max_tokens)
            msgs.append({"role": "assistant", "content": res["text"]})
            turns.append(res)
            print(f"{a.system} multiturn run {rep + 1} turn {t + 1}: {res['ms']:.0f} ms (first token "
                  f"{fmt(res['ttft_ms'])} ms), prompt {res['prompt_tokens']} tokens, cached "
                  f"{fmt(res['cached_tokens'])}", flush=True)
        repeats.append({"turns": turns})
    per_turn = [med([r["turns"][t]["ms"] for r in repeats]) for t in range(a.turns)]
    print(f"{a.system} multiturn: median ms per turn: " + ", ".join(f"{x:.0f}" for x in per_turn))
    return {"turns": a.turns, "max_tokens": a.max_tokens, "repeats": repeats}


def phase_stats(rows, wall_s):
    tokens = sum(r["completion_tokens"] for r in rows)
    return {"requests": len(rows), "completion_tokens": tokens, "wall_s": wall_s,
            "tokens_per_s": tokens / wall_s if wall_s else None,
            "requests_per_s": len(rows) / wall_s if wall_s else None,
            "p50_ms": med([r["ms"] for r in rows]), "p99_ms": pct([r["ms"] for r in rows], 0.99),
            "ttft_p50_ms": med([r["ttft_ms"] for r in rows]),
            "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in rows), "cached_tokens": sum_cached(rows)}


def shared(server, a):
    def run_round(system_text, rng_seed, rounds, client_rows):
        def client(c):
            for k in rounds:
                rng = random.Random((rng_seed * 7919 + c) * 1009 + k)
                msgs = [{"role": "system", "content": system_text},
                        {"role": "user", "content": shared_question(rng, c, k)}]
                client_rows[c].append(strip(chat(server, msgs, a.max_tokens)))
        return at_once(a.clients, client)

    # Warm-up: every client once, on a system prompt of its own (nothing of it is timed or reused).
    warm_rows = [[] for _ in range(a.clients)]
    run_round(shared_system(random.Random(a.seed * 1000 + 999), a.system_words), 999, [0], warm_rows)
    repeats = []
    for rep in range(a.repeats):
        text = shared_system(random.Random(a.seed * 1000 + rep), a.system_words)
        cold = [[] for _ in range(a.clients)]
        warm = [[] for _ in range(a.clients)]
        cold_s = run_round(text, rep, [0], cold)
        warm_s = run_round(text, rep, range(1, a.rounds), warm) if a.rounds > 1 else 0.0
        cold_rows = [r for rows in cold for r in rows]
        warm_rows = [r for rows in warm for r in rows]
        st = {"cold": phase_stats(cold_rows, cold_s), "warm": phase_stats(warm_rows, warm_s) if warm_rows else None,
              "whole": phase_stats(cold_rows + warm_rows, cold_s + warm_s), "rows": cold_rows + warm_rows}
        for ph in ("cold", "warm", "whole"):
            s = st[ph]
            if s:
                print(f"{a.system} shared run {rep + 1} {ph}: {s['requests']} requests in {s['wall_s']:.1f} s, "
                      f"{s['tokens_per_s']:.1f} completion tokens/s, {s['requests_per_s']:.2f} requests/s, "
                      f"p50 {s['p50_ms']:.0f} ms, p99 {s['p99_ms']:.0f} ms, prompt {s['prompt_tokens']} tokens, "
                      f"cached {fmt(s['cached_tokens'])}", flush=True)
        repeats.append(st)
    return {"clients": a.clients, "rounds": a.rounds, "max_tokens": a.max_tokens,
            "system_tokens_approx": repeats[0]["rows"][0]["prompt_tokens"] if repeats else None,
            "repeats": repeats}


def copy_fidelity(text, source):
    """The share of the passage the answer reproduces verbatim from the passage's start, wherever that start
    appears in the answer (a model may say something before it: 1.0 is all of the passage, verbatim)."""
    t, s = text.strip(), source.strip()
    at = t.find(s[:20])
    if at > 0:
        t = t[at:]
    n = 0
    for x, y in zip(t, s):
        if x != y:
            break
        n += 1
    return n / len(s) if s else 0.0


def draft_totals(rows):
    tot = {}
    for r in rows:
        for k, v in r["draft"].items():
            tot[k] = tot.get(k, 0) + v
    return tot


def acceptance(resp, metrics, timings):
    """(accepted, drafted) from the responses' own counters, else from /metrics' draft samples."""
    if "timings.draft_n" in resp:
        return resp.get("timings.draft_n_accepted", 0), resp["timings.draft_n"]
    if timings:
        return 0, 0
    acc = next((v for k, v in resp.items() if k.endswith("accepted_prediction_tokens")), None)
    rej = next((v for k, v in resp.items() if k.endswith("rejected_prediction_tokens")), None)
    if acc is not None and rej is not None and acc + rej > 0:
        return acc, acc + rej
    if metrics and ("aoi_draft_tokens_total" in metrics or "aoi_draft_accepted_total" in metrics):
        return metrics.get("aoi_draft_accepted_total", 0), metrics.get("aoi_draft_tokens_total", 0)
    if metrics:
        plain = {k: v for k, v in metrics.items()
                 if not any(k.split("{")[0].endswith(s) for s in ("_bucket", "_sum", "_count"))}
        acc = [v for k, v in plain.items() if "accept" in k]
        drafted = [v for k, v in plain.items() if "accept" not in k and "reject" not in k and
                   any(w in k for w in ("token", "drafted", "proposed")) and "max" not in k]
        rej = [v for k, v in plain.items() if "reject" in k]
        if len(acc) == 1 and len(drafted) == 1:
            return acc[0], drafted[0]
        if len(acc) == 1 and len(rej) == 1:
            return acc[0], acc[0] + rej[0]
    return None, None


def copy(server, a):
    draft_names = ("draft", "specul", "lookup")

    def run(seed, requests):
        rows = [[] for _ in range(a.clients)]

        def client(c):
            for i in range(requests):
                rng = random.Random(seed * 100003 + c * 101 + i)
                text = passage(rng, a.lines)
                res = chat(server, copy_messages(text), a.max_tokens)
                res["fidelity"] = copy_fidelity(res["text"], text)
                rows[c].append(strip(res))
        wall = at_once(a.clients, client)
        return wall, [r for rr in rows for r in rr]

    run(a.seed * 1000 + 999, 1)  # warm-up: each client once, passages of their own
    repeats = []
    for rep in range(a.repeats):
        before = server.metrics(draft_names)
        wall, rows = run(a.seed * 1000 + rep, a.requests)
        after = server.metrics(draft_names)
        metrics = None if before is None or after is None else \
            {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0) != 0}
        resp = draft_totals(rows)
        acc, drafted = acceptance(resp, metrics, any(r["has_timings"] for r in rows))
        tokens = sum(r["completion_tokens"] for r in rows)
        st = {"wall_s": wall, "completion_tokens": tokens, "tokens_per_s": tokens / wall,
              "decode_tps_p50": med([r["decode_tps"] for r in rows]),
              "ttft_p50_ms": med([r["ttft_ms"] for r in rows]), "p50_ms": med([r["ms"] for r in rows]),
              "fidelity_mean": statistics.fmean(r["fidelity"] for r in rows),
              "copied": sum(1 for r in rows if r["fidelity"] >= 0.999), "requests": len(rows),
              "accepted": acc, "drafted": drafted, "acceptance": acc / drafted if drafted else None,
              "response_draft_counters": resp, "metrics_draft_counters": metrics, "rows": rows}
        print(f"{a.system} copy x{a.clients} run {rep + 1}: {tokens} tokens in {wall:.1f} s, {st['tokens_per_s']:.1f} "
              f"tokens/s end to end, decode p50 {fmt(st['decode_tps_p50'], 1)} tokens/s per request, "
              f"acceptance {fmt(acc)}/{fmt(drafted)}, copied {st['copied']}/{len(rows)} "
              f"(mean fidelity {st['fidelity_mean']:.2f})", flush=True)
        if metrics:
            print(f"{a.system} draft counters from /metrics: {json.dumps(metrics)}")
        repeats.append(st)
    return {"clients": a.clients, "requests_per_client": a.requests, "lines": a.lines, "max_tokens": a.max_tokens,
            "repeats": repeats}


def response_cache(server, a):
    def ask(seed, stream):
        rng = random.Random(seed)
        msgs = [{"role": "system", "content": chat_system(rng)}, {"role": "user", "content": user_turn(rng, 0)}]
        return chat(server, msgs, a.max_tokens, stream=stream)

    ask(a.seed * 1000 + 999, False)  # warm-up
    repeats = []
    for rep in range(a.repeats):
        seed = a.seed * 1000 + rep
        before = server.metrics(("response", "cache"))
        first = ask(seed, False)
        again = ask(seed, False)
        after = server.metrics(("response", "cache"))
        metrics = None if before is None or after is None else \
            {k: after[k] - before.get(k, 0) for k in after if after[k] - before.get(k, 0) != 0}
        st = {"first_ms": first["ms"], "repeat_ms": again["ms"], "same_text": first["text"] == again["text"],
              "completion_tokens": first["completion_tokens"], "first_cached_tokens": first["cached_tokens"],
              "repeat_cached_tokens": again["cached_tokens"], "metrics": metrics}
        print(f"{a.system} response cache run {rep + 1}: first {first['ms']:.1f} ms, the same request again "
              f"{again['ms']:.1f} ms ({first['ms'] / again['ms']:.0f}x), same answer: {st['same_text']}", flush=True)
        if metrics:
            print(f"{a.system} cache counters from /metrics: {json.dumps(metrics)}")
        repeats.append(st)
    return {"max_tokens": a.max_tokens, "repeats": repeats}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", choices=["multiturn", "shared", "copy", "response-cache"])
    ap.add_argument("--url", required=True)
    ap.add_argument("--system", required=True, help="the system's name in the results (aoi, llama-server)")
    ap.add_argument("--config", default="", help="what else is particular to this run (drafting on, off)")
    ap.add_argument("--out", required=True, help="JSON file to write")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--turns", type=int, default=10)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--system-words", type=int, default=750)
    ap.add_argument("--requests", type=int, default=2)
    ap.add_argument("--lines", type=int, default=8)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900)
    a = ap.parse_args()
    server = Server(a.url, a.timeout)
    fn = {"multiturn": multiturn, "shared": shared, "copy": copy, "response-cache": response_cache}[a.scenario]
    t0 = time.perf_counter()
    result = fn(server, a)
    result.update({"scenario": a.scenario, "system": a.system, "config": a.config,
                   "seconds": time.perf_counter() - t0})
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
