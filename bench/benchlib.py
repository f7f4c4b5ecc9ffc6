#!/usr/bin/env python3
"""What the benchmark scripts share (Python 3's standard library only):

- provenance: the commit a run is measured at and the command that ran it, as every table names them
  ("Measured at commit `abc1234`: `bench/x/run.sh --preset cpu`"). A checkout whose tracked files differ from
  its commit is named `abc1234+changes`: bench/update_docs.py refuses such a table.
- noise: when two measurements differ by less than their repeats' spread, a report says "equal (within
  noise)", never a speedup.

    python3 bench/benchlib.py commit         prints the commit (bench/lib.sh's bench_commit, scripts/fuzz.sh and
                                             the C++ benchmarks call this: one definition of "the commit")
    python3 bench/benchlib.py command ARG... prints the arguments as one command line, quoted where needed
"""
import http.client
import json
import os
import re
import shlex
import socket
import statistics
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# What marks a commit as not clean: ours ("+changes") and git describe --dirty's ("-dirty").
DIRTY_MARKS = ("+changes", "-dirty")
EQUAL = "equal (within noise)"


def _git(*args, root=ROOT):
    return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=True).stdout


def head(root=ROOT):
    """HEAD's commit, short (raises outside a git checkout)."""
    return _git("rev-parse", "--short", "HEAD", root=root).strip()


def changed_files(root=ROOT):
    """The tracked files that differ from HEAD, staged or not (paths relative to the repository). Untracked
    files do not count: the build lists its sources, so a new file matters only through a changed tracked one."""
    out = _git("status", "--porcelain", "--untracked-files=no", root=root)
    return [line[3:].split(" -> ")[-1] for line in out.splitlines() if line.strip()]


def commit(root=ROOT):
    """This checkout's commit (short); `+changes` when a tracked file differs from it; `unknown` outside a git
    checkout."""
    try:
        return head(root) + ("+changes" if changed_files(root) else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def is_clean(c):
    """Whether a recorded commit names a clean checkout: a commit, not `unknown`, no dirty mark."""
    return bool(c) and c != "unknown" and not any(m in c for m in DIRTY_MARKS)


def command(argv):
    """A command line as a shell shows it, quoted only where needed."""
    return shlex.join(argv)


def measured_line(commit_, command_):
    return f"Measured at commit `{commit_}`: `{command_}`"


def measured_of(settings, script):
    """The provenance line of a run from its settings.json (`commit`, `command`: what bench/*/run.sh records).
    A run recorded before the scripts kept their command names its preset only, and says so."""
    command_ = settings.get("command")
    line = measured_line(settings["commit"], command_ or f"{script} --preset {settings['preset']}")
    return line if command_ else line + " (the command was not recorded in full: other options may have been given)"


MEASURED = re.compile(r"Measured at commit `([^`]*)`")


# ---- Noise ----

def runs_of(x):
    """A measurement's runs as a list: a list as it is, a single figure as one run, None as none."""
    if x is None:
        return []
    return [v for v in x if v is not None] if isinstance(x, (list, tuple)) else [x]


def median(x):
    r = runs_of(x)
    return statistics.median(r) if r else None


def mean(x):
    r = runs_of(x)
    return statistics.fmean(r) if r else None


def within_noise(a, b):
    """Whether two measurements (their runs) are equal within their run-to-run noise: their ranges (min..max of
    the runs) overlap, or their medians differ by less than the wider range. None when neither has two runs
    (no spread is known)."""
    a, b = runs_of(a), runs_of(b)
    if not a or not b or (len(a) < 2 and len(b) < 2):
        return None
    overlap = min(a) <= max(b) and min(b) <= max(a)
    wider = max(max(a) - min(a), max(b) - min(b))
    return overlap or abs(statistics.median(a) - statistics.median(b)) < wider


def _ratio(num, den, digits, center):
    """(the ratio's text, whether within noise: True, False or None when no spread is known), or None."""
    n, d = center(num), center(den)
    if n is None or not d:
        return None
    return f"{n / d:.{digits}f}x", within_noise(num, den)


def ratio_text(num, den, digits=2, center=median):
    """median(num) / median(den) (or another center) as `1.23x`; `equal (within noise)` when the two are within
    their noise; the ratio marked `(one run)` when neither was repeated, its noise unknown."""
    r = _ratio(num, den, digits, center)
    if r is None:
        return "-"
    return EQUAL if r[1] else r[0] + (" (one run)" if r[1] is None else "")


def ratio_note(num, den, digits=2, center=median):
    """The same, to follow the two figures in a table cell: ` (1.23x)`, ` (1.23x, one run)` or `, equal (within
    noise)`."""
    r = _ratio(num, den, digits, center)
    if r is None:
        return ""
    return f", {EQUAL}" if r[1] else f" ({r[0]}{', one run' if r[1] is None else ''})"


def faster_text(fast, slow, digits=1):
    """How `fast` compares with `slow` (times, lower is better): `2.0x faster`, `1.3x slower` or `equal (within
    noise)`."""
    f, s = median(fast), median(slow)
    if f is None or s is None or f <= 0 or s <= 0:
        return "-"
    noise = within_noise(fast, slow)
    if noise:
        return EQUAL
    text = f"{s / f:.{digits}f}x faster" if s >= f else f"{f / s:.{digits}f}x slower"
    return text + (" (one run)" if noise is None else "")


NOISE_RULE = ("A ratio is given only where the two measurements differ by more than their run-to-run noise; where "
              "their repeats' ranges (min..max) overlap, or their medians differ by less than the wider range, "
              "it reads \"equal (within noise)\"; \"one run\" marks a ratio of measurements taken once, whose "
              "noise is unknown.")


def free_port():
    """A TCP port free on loopback now, for a server a benchmark starts."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def json_call(port, method, path, body=None, timeout=60):
    """One JSON request to a server on loopback: (status, parsed body or None). Raises OSError when it cannot
    be reached."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    c.request(method, path, body=json.dumps(body) if body is not None else None,
              headers={"content-type": "application/json"})
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, (json.loads(data) if data else None)


def main():
    if sys.argv[1:] == ["commit"]:
        c = commit()
        if not is_clean(c):
            print(f"note: this checkout is not a clean commit ({c}): a run from it is recorded as such, and "
                  "bench/update_docs.py will not put its tables into the docs", file=sys.stderr)
        print(c)
        return
    if sys.argv[1:2] == ["command"] and len(sys.argv) > 2:
        print(command(sys.argv[2:]))
        return
    print(__doc__, file=sys.stderr)
    sys.exit(2)


if __name__ == "__main__":
    main()
