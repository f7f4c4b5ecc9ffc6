#!/usr/bin/env python3
"""Puts a benchmark's generated markdown into docs/benchmarks.md, between
<!-- NAME:begin --> and <!-- NAME:end -->, so that the docs' tables are always a script's output from a run,
never typed by hand.

    bench/update_docs.py NAME FILE [--docs docs/benchmarks.md] [--command CMD --commit SHA]

FILE is what the benchmark (or its report script) printed. When it does not name the commit it was measured
at itself, give --command (what was run) and --commit (where: the checkout the run was made from); the
section then starts with "Measured at commit SHA: CMD".

A section the docs do not have yet is added first where SECTIONS says (its heading, what the benchmark does
and how it is run, then the markers): `bench/update_docs.py stateless bench-out/stateless-cpu/summary.md`
adds "Stateless endpoints" before "Soak" on its first run and replaces what is between its markers after that.
"""
import argparse
import re
import sys


# Sections added on their first update: NAME -> (the heading the section goes before, its text up to the markers).
SECTIONS = {
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


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("name")
    ap.add_argument("file")
    ap.add_argument("--docs", default="docs/benchmarks.md")
    ap.add_argument("--command", help="the command that printed FILE")
    ap.add_argument("--commit", help="the commit it was run at")
    args = ap.parse_args()
    with open(args.file) as f:
        lines = f.read().strip().splitlines()
    # Log lines the engine printed among the results ("[2026-11-23 16:42:03.055] [warning] ...") are not
    # results; a benchmark's own headings become bold lines inside the docs' section.
    lines = [l for l in lines if not re.match(r"^\[\d{4}-\d\d-\d\d ", l)]
    lines = [re.sub(r"^#+ (.*)$", r"**\1**", l) for l in lines]
    text = "\n".join(lines) + "\n"
    if args.command or args.commit:
        if not (args.command and args.commit):
            sys.exit("--command and --commit go together")
        text = f"Measured at commit `{args.commit}`: `{args.command}`\n\n" + text
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
