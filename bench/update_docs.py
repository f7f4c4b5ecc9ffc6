#!/usr/bin/env python3
"""Puts a benchmark's generated markdown into docs/benchmarks.md, between
<!-- NAME:begin --> and <!-- NAME:end -->, so that the docs' tables are always a script's output from a run,
never typed by hand.

    bench/update_docs.py NAME FILE [--docs docs/benchmarks.md] [--command CMD [--commit SHA]]

FILE is what the benchmark (or its report script) printed, headed by the line every benchmark prints,
"Measured at commit `SHA`: `COMMAND`" (the command as typed; the commit as bench/benchlib.py takes it when
the run starts). Only a clean commit goes into the docs: this script refuses (exit status 1) a FILE that names
no commit, an unknown one, or one with uncommitted changes (`abc1234+changes`, `abc1234-dirty`, `unknown`),
and a commit this repository does not have.

For a program that does not print that line (scripts/soak.sh), give --command (what was run): the section then
starts with "Measured at commit SHA: CMD", SHA being this checkout's commit, or --commit SHA where the run was
made from another checkout. Either is taken on trust, so both are refused while this checkout has changes
other than to the docs file itself: commit them, run again, then update the docs.

A section the docs do not have yet is added first where SECTIONS says (its heading, what the benchmark does
and how it is run, then the markers): `bench/update_docs.py stateless bench-out/stateless-cpu/summary.md`
adds "Stateless endpoints" before "Soak" on its first run and replaces what is between its markers after that.
"""
import argparse
import os
import re
import subprocess
import sys

sys.dont_write_bytecode = True  # bench/benchlib.py leaves no bytecode beside it in the tree
import benchlib  # noqa: E402


# Sections added on their first update: NAME -> (the heading the section goes before, its text up to the markers).
SECTIONS = {
    "analyst": ("## Stateless endpoints", """## The analyst model's answers

```sh
bench/analyst/run.sh --preset cpu
bench/update_docs.py analyst bench-out/analyst-cpu/summary.md
```

How often `models/analyst.gguf` (models/analyst.md) answers the streaming benchmark's questions right, through
aoi: held-out streams (seeds no training window used) at the demo's window (50 bars, about 1,500 tokens) and at
the streaming benchmark's `cpu` window (100 bars, a length only a tenth of the model's last training windows
had), every question type asked after the last bar of a stateful and of a naive session, graded by the
benchmark's rules. Beside them, trivial answers over the same streams: each yes/no question's most common
answer, and the last bar's open for the prices.

"""),
    "stateless": ("## Soak", """## Stateless endpoints

```sh
bench/stateless/run.sh --preset cpu            # this page's run (2 cores, three runs of each measurement)
```

aoi's OpenAI-compatible `/v1/chat/completions` side by side with llama-server's, on the same model file, with
the same engine settings pinned on both and printed with the results (threads for decode and prefill, batch and
micro-batch, KV cache type, flash attention off), as many llama-server slots (`-np`) as aoi has completion
slots (`--pool-slots`), each with the cells of an aoi pool sequence, and llama-server's prompt cache on (the
slot keeps its last prompt; `--cache-ram` at its default). Every request is greedy and streamed with its usage,
so that it is timed to its first and its last token. The rules that make the comparison fair:

- every scenario gets a fresh server per system, and one system runs at a time, the other stopped;
- every server answers warm-up requests of their own (text that no timed request shares) before anything is
  timed; every measurement is repeated and the median kept;
- no two requests are the same (aoi's response cache would answer a repeated request without inference:
  that is measured on its own line, for aoi only), and each repeat of a measurement has text of its own, so
  that no run finds the previous run's prompt cached.

Scenarios: a **multi-turn chat** of one client (10 turns, each sending the whole conversation so far: later
turns should cost only their new tokens); a **shared system prompt** (8 clients, one system prompt of about
1,000 tokens and a question of its own per request: the first round, sent at once with nothing cached, and the
later rounds, sent back to back, reported apart and together); **copy-heavy answers** (a passage of dates,
times, prices and sentences to repeat exactly, at 1 and 8 clients, prompt-lookup drafting on and off: aoi's
`--draft-max`, llama-server's n-gram speculative decoding), with the drafts' acceptance from the servers' own
counters, so that a model that does not copy shows as one.

`bench/stateless/run.sh` writes the summary to `bench-out/stateless-<preset>/summary.md`, which
`bench/update_docs.py stateless bench-out/stateless-cpu/summary.md` puts below.

"""),
    "fuzz": ("## GPU", """## Fuzzing

```sh
scripts/fuzz.sh --runs 10000000 --out bench-out/fuzz.md fuzz_request_json fuzz_http_request fuzz_records_body \\
  fuzz_record_template
bench/update_docs.py fuzz bench-out/fuzz.md
```

`scripts/fuzz.sh` builds the libFuzzer targets of `tests/fuzz` with Clang, AddressSanitizer and
UndefinedBehaviorSanitizer, and runs each from its seeds for ten million inputs (as many at a time as there
are cores, each on one core). Each target checks the promises of what it fuzzes, not only that it does not
crash (the comment at the top of each target lists them). "Kept" counts the inputs that once broke a target
(found by earlier runs, each fixed) in `tests/fuzz/regressions/`, which CI replays before a short run of every
target. With `--out` it writes the table below, naming the command and the commit.

"""),
    "fuzz-renderer": ("## GPU", """\
`fuzz_record_renderer` tokenizes every rendered record with the real test model's tokenizer, about fifty
inputs a second: it runs for a fixed time instead of ten million inputs.

```sh
scripts/fuzz.sh --seconds 900 --out bench-out/fuzz-renderer.md fuzz_record_renderer
bench/update_docs.py fuzz-renderer bench-out/fuzz-renderer.md
```

"""),
    "sources": ("## Stateless endpoints", """## Sessions fed by their brokers

```sh
bench/sources/run.sh --samples 30 --backlog 1000 --recoveries 3 --repeats 3   # this page's run (2 cores)
bench/update_docs.py sources bench-out/sources.md
```

A session fed by its source — Redis (Debian's redis-server), Kafka (librdkafka's mock cluster in the
`aoi-kafka-mock` helper, as in the tests: Debian 12 packages no Kafka broker, so its figures are those of a
broker in another process on loopback, not of a Kafka cluster) and MQTT (Debian's mosquitto) — against the same
records pushed over HTTP (`POST /v1/sessions/{id}/data` on a kept-alive connection), one system at a time,
each on a fresh server, on loopback. **Latency**: one record published (or pushed) at a time, each after the
previous one's `data_updated`, timed from the publish to the event on the session's SSE stream, after warm-up
records. **Rate**: a backlog (in the broker for Redis and Kafka, published as fast as the client goes for MQTT,
pushed in batches of 100 for HTTP) until all of it is ingested. **Recovery**: a producer publishing every
10 ms, aoi killed with `kill -9` and restarted on its data directory, timed from the restart to the first new
record ingested (and to `/health`, the part that is aoi loading). The tiny model makes ingestion cheap, so
the figures are the pipeline's, not the model's.

The issue's target is a publish → `data_updated` p50 within 5 ms of an HTTP push's. Where a row misses it, the
reasons known: the Kafka consumer's fetch waits at the broker up to `fetch.wait.max.ms` (100 ms), and the mock
broker answers a waiting fetch only then, not when a message arrives as a Kafka broker does, so its row is an
upper bound that says little about a real cluster; MQTT's path has one more hop (publisher → mosquitto → aoi)
than a push, and where the rest of its gap goes was not traced.

"""),
    "sampling-cpu": ("## Soak", """## Greedy choice on the device

```sh
build/bench/aoi-bench-sampling -m build/models/test-micro.gguf --rows 1,8 --steps 32 --reps 5 > bench-out/sampling-cpu.md
bench/update_docs.py sampling-cpu bench-out/sampling-cpu.md
build/bin/ggml-rpc-server -H 127.0.0.1 -p 50052 -t 2 &     # the model in an rpc-server on loopback
build/bench/aoi-bench-sampling -m build/models/test-micro.gguf --rpc 127.0.0.1:50052 --rows 1,8 --steps 32 \\
  --reps 5 > bench-out/sampling-rpc.md
bench/update_docs.py sampling-rpc bench-out/sampling-rpc.md
```

A greedy token is the argmax of its row of logits, and its confidence the gap to the runner-up (the paper's
§3.8). On the host that reads the whole row: llama.cpp copies it from the device (128,256 floats, 513 KB, for
Llama 3's vocabulary) and `engine::top2` scans it with the widest vector instructions the CPU has
(`aoi-bench-top2`: 30 µs a row with AVX-512 here, 107 µs with the scalar loop). With `--backend-sampling`
the device holding the output layer finds the top two instead (llama.cpp's backend sampling: a top-k of two in
the pass) and two logits and two ids come back. `aoi-bench-sampling` times a whole decode step (one token per
sequence, then the choice) both ways, one mode at a time on a fresh context, warmed up, median of five runs;
the difference is what the copy and the scan cost against the device's top-k. The test model is tiny, so the
step is mostly the output layer and the choice: the absolute difference per row is the part that carries over
to larger models with the same vocabulary.

On the CPU backend there is no copy to save and ggml's top-k costs more than the AVX-512 scan; in an rpc-server
on loopback the row crosses a socket, but quickly, and the rpc-server's CPU computes the same slow top-k. On a
network the copy costs what the link makes it (513 KB a row: about 4 ms at 1 Gb/s), which is why aoi turns
backend sampling on by default for an rpc-server's output layer; that case was not measured here (one machine).
An H200 (below, "GPU") showed the same as the CPU: the top-k costs more than the copy and the scan, so a local
GPU keeps the host path by default.

"""),
    "sampling-rpc": ("## Soak", """\
The same model with every layer and the KV cache in an rpc-server on loopback (`-t 2`):

"""),
    "budget": ("## Sessions on disk", """### A question beside background work: the pass-time budget

```sh
bench/multitenant/run.sh --preset cpu --sessions 8 --budgets 0,400 --no-llama --out bench-out/budget2
bench/update_docs.py budget bench-out/budget2/report.md
```

The multi-tenant benchmark at N = 8, aoi run twice one after the other (each alone on the machine, fresh,
warmed up): without the pass-time budget (`--interactive-budget-ms 0`) and with the default (400 ms). The
column that matters is the question asked while the 7 neighbours ingest a backlog of 100 bars each, with how
fast the neighbours ingested meanwhile, against the same question beside idle neighbours. `--trace-passes`
(docs/api.md) shows where such a question's time goes, pass by pass.

"""),
    "kv": ("## Sessions on disk", """### What a quantized KV cache buys

```sh
bench/kv/run.sh
bench/update_docs.py kv bench-out/kv/report.md
```

One session on this CPU, as `aoi replay` streams it (above), once per KV cache setting: F16 (with and without
flash attention), keys in Q8_0 (aoi's default since this measurement), keys and values in Q8_0, and both in Q4_0
(llama.cpp quantizes values only with flash attention). The KV bytes a token come from the model's shape and the cache types;
the latency is a question's at each depth, answered on the session's state.

"""),
    "cluster": ("## Stateless endpoints", """## More than one aoi: a cluster on NATS JetStream

```sh
bench/cluster/run.sh --out bench-out/cluster
bench/update_docs.py cluster bench-out/cluster/report.md
```

Three replicas (`aoi serve --cluster`, a shared snapshot folder) on one NATS server with JetStream, behind
HAProxy as `deploy/haproxy` ships it, and two single aoi servers with a data directory; all on this machine,
each system timed alone. Failover: `kill -9` of the replica holding a session, timed until another replica
answers a question about it that needs every record (`min_seq`), first with the holder's newest snapshot in
the shared folder, then with the snapshots removed (the successor ingests the session's whole stream). The
time includes the lease's expiry (the TTL below): a replica cannot take a session whose holder may still be
alive. Two cores cannot show throughput growing with replicas, so there is no such table; the push and
forwarding rows give what a cluster costs a request instead.

"""),
}


def ensure_section(doc, name):
    """The docs with NAME's section added before its place when they do not have its markers yet."""
    begin, end = f"<!-- {name}:begin -->", f"<!-- {name}:end -->"
    if begin in doc or name not in SECTIONS:
        return doc
    before, text = SECTIONS[name]
    block = text + begin + "\n" + end + "\n\n"
    at = doc.find("\n" + before + "\n")
    if at < 0:
        return doc.rstrip("\n") + "\n\n" + block.rstrip("\n") + "\n"
    return doc[:at + 1] + block + doc[at + 1:]


def refuse(why):
    sys.exit(f"update_docs.py: refused: {why}")


def has_commit(sha):
    """Whether this repository has the commit (a table must name one that can be checked out)."""
    try:
        subprocess.run(["git", "-C", benchlib.ROOT, "rev-parse", "--verify", "--quiet", sha + "^{commit}"],
                       capture_output=True, check=True)
        return True
    except (OSError, subprocess.CalledProcessError):
        return False


def trusted_commit(args):
    """The commit a section given --command names: --commit, or this checkout's; refused while this checkout
    has changes other than to the docs file (the run may have been made with them)."""
    docs = os.path.relpath(os.path.abspath(args.docs), benchlib.ROOT)
    try:
        changed = [f for f in benchlib.changed_files() if f != docs]
        here = benchlib.head()
    except (OSError, subprocess.CalledProcessError):
        refuse("--command needs a git checkout, to name its commit")
    if changed:
        refuse(f"--command takes the command and commit on trust, and this checkout has uncommitted changes "
               f"({', '.join(changed[:5])}{', ...' if len(changed) > 5 else ''}): commit them, run the benchmark "
               f"again, then update the docs")
    return args.commit or here


def check_provenance(text, file):
    """Refuses a section that does not name a clean commit of this repository."""
    commits = benchlib.MEASURED.findall(text)
    if not commits:
        refuse(f"{file} does not say where it was measured (no \"Measured at commit `SHA`: `COMMAND`\" line): "
               "run the benchmark again (every benchmark prints that line), or give --command for a program that "
               "does not")
    for c in commits:
        if not benchlib.is_clean(c):
            refuse(f"{file} was measured at `{c}`, not a clean commit: the tables would not say what code they "
                   "measured. Commit the changes, run the benchmark again, then update the docs")
        if not has_commit(c):
            refuse(f"{file} names commit `{c}`, which this repository does not have (fetch it, or run again here)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name")
    ap.add_argument("file")
    ap.add_argument("--docs", default="docs/benchmarks.md")
    ap.add_argument("--command", help="the command that printed FILE (when FILE does not name it)")
    ap.add_argument("--commit", help="with --command: the commit it ran at (default: this checkout's)")
    args = ap.parse_args()
    with open(args.file) as f:
        lines = f.read().strip().splitlines()
    # Log lines the engine printed among the results ("[2026-11-23 16:42:03.055] [warning] ...") are not
    # results; a benchmark's own headings become bold lines inside the docs' section.
    lines = [l for l in lines if not re.match(r"^\[\d{4}-\d\d-\d\d ", l)]
    lines = [re.sub(r"^#+ (.*)$", r"**\1**", l) for l in lines]
    text = "\n".join(lines) + "\n"
    if args.commit and not args.command:
        refuse("--commit goes with --command")
    if args.command:
        if benchlib.MEASURED.search(text):
            refuse(f"{args.file} names its commit and command itself: drop --command and --commit")
        text = benchlib.measured_line(trusted_commit(args), args.command) + "\n\n" + text
    check_provenance(text, args.file)
    with open(args.docs) as f:
        doc = ensure_section(f.read(), args.name)
    begin, end = f"<!-- {args.name}:begin -->", f"<!-- {args.name}:end -->"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if not pattern.search(doc):
        sys.exit(f"{args.docs} has no {begin} ... {end} section")
    doc = pattern.sub(lambda _: begin + "\n" + text + end, doc)
    with open(args.docs, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    main()
