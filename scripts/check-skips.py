#!/usr/bin/env python3
"""Fails a CTest run that skipped a test outside tests/skip-allowlist.txt, and a label that has no tests.

    scripts/check-skips.py --list                        print the allowlist with the reasons
    scripts/check-skips.py JUNIT.xml [--stage NAME]      check one run (ctest --output-junit JUNIT.xml)
    scripts/check-skips.py --labels BUILD_DIR LABEL...   fail unless each label has at least one test

A skip counts as a pass in CTest's summary, so a test that cannot run (a model that fails to load, a tool that
is missing) would otherwise vanish with the run green.
"""
import argparse
import pathlib
import subprocess
import sys
import xml.etree.ElementTree as ET

ROOT = pathlib.Path(__file__).resolve().parent.parent
ALLOWLIST = ROOT / "tests" / "skip-allowlist.txt"


def allowlist():
    allowed = {}
    for line in ALLOWLIST.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        name, _, reason = line.partition(" ")
        allowed[name] = reason.strip()
    return allowed


def skipped_tests(junit):
    """Names of the tests a CTest JUnit report says did not run or were skipped."""
    out = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        status = case.get("status", "")
        if status in ("disabled", "notrun") or case.find("skipped") is not None:
            out.append(case.get("name"))
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("junit", nargs="?")
    p.add_argument("--stage", default="")
    p.add_argument("--list", action="store_true")
    p.add_argument("--labels", nargs="+", metavar=("BUILD_DIR", "LABEL"))
    a = p.parse_args()
    allowed = allowlist()
    if a.list:
        print(f"tests allowed to skip ({ALLOWLIST.relative_to(ROOT)}):")
        for name, reason in allowed.items():
            print(f"  {name}: {reason}")
        return 0
    if a.labels:
        build, *labels = a.labels
        empty = []
        for label in labels:
            listed = subprocess.run(["ctest", "--test-dir", build, "-N", "-L", f"^{label}$"], capture_output=True,
                                    text=True, check=True).stdout
            total = [line for line in listed.splitlines() if line.startswith("Total Tests:")]
            if not total or int(total[0].split(":")[1]) == 0:
                empty.append(label)
        if empty:
            print(f"check-skips: no tests with the label(s) {', '.join(empty)} in {build}: a suite that is not "
                  "registered must not pass as run", file=sys.stderr)
            return 1
        return 0
    if not a.junit:
        p.error("a JUnit report, --list or --labels")
    skipped = skipped_tests(a.junit)
    stage = f" ({a.stage})" if a.stage else ""
    for name in skipped:
        if name in allowed:
            print(f"check-skips{stage}: skipped, as allowed: {name}: {allowed[name]}")
    unexpected = [n for n in skipped if n not in allowed]
    if unexpected:
        print(f"check-skips{stage}: {len(unexpected)} test(s) skipped or not run outside the allowlist:",
              file=sys.stderr)
        for name in unexpected:
            print(f"  {name}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
