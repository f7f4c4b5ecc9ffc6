#!/usr/bin/env python3
"""Puts a benchmark's generated markdown into docs/benchmarks.md, between
<!-- NAME:begin --> and <!-- NAME:end -->, so that the docs' tables are always a script's output from a run,
never typed by hand.

    bench/update_docs.py NAME FILE [--docs docs/benchmarks.md] [--command CMD --commit SHA]

FILE is what the benchmark (or its report script) printed. When it does not name the commit it was measured
at itself, give --command (what was run) and --commit (where: the checkout the run was made from); the
section then starts with "Measured at commit SHA: CMD".
"""
import argparse
import re
import sys


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
        doc = f.read()
    begin, end = f"<!-- {args.name}:begin -->", f"<!-- {args.name}:end -->"
    pattern = re.compile(re.escape(begin) + ".*?" + re.escape(end), re.S)
    if not pattern.search(doc):
        sys.exit(f"{args.docs} has no {begin} ... {end} section")
    doc = pattern.sub(lambda _: begin + "\n" + text + end, doc)
    with open(args.docs, "w") as f:
        f.write(doc)


if __name__ == "__main__":
    main()
