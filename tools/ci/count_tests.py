#!/usr/bin/env python3
"""Counts the test cases of a `bazel test` run from the JUnit XML files it wrote.

Usage: count_tests.py BAZEL_TESTLOGS_DIR [LABEL [TARGET...]]
Prints one line, `LABEL: N passed, N failed` (no label: `N passed, N failed`), and lists every
failed test case above it, with the first lines of its failure message (CI shows only the ends
of a long log: ./run test prints these lines again at its end). A test target whose XML is missing or unreadable (it crashed before
writing it) counts as one failed case, so a crash can never hide as "0 failed".
With TARGETs (labels such as //simverbs/sim:cm_test), only their logs are read, and one that
has none counts as a failed case: a run of some targets is not credited with the stale logs of
others left in the same directory by an earlier run.
"""

import os
import sys
import xml.etree.ElementTree as ET


def target_dir(label):
    """//pkg/sub:name -> pkg/sub/name, the target's directory under bazel-testlogs."""
    package, _, name = label.lstrip("/").partition(":")
    return os.path.join(package, name or os.path.basename(package))


def first_lines(case, lines=3, width=200):
    """' -- ' and the first lines of a failed case's message, each cut to `width` characters."""
    element = case.find("failure")
    if element is None:
        element = case.find("error")
    text = (element.get("message") or element.text or "").strip()
    kept = [line.strip()[:width] for line in text.splitlines() if line.strip()][:lines]
    return f" -- {' | '.join(kept)}" if kept else ""


def log_tail(root, lines=2, width=200):
    """' -- ' and the last lines of a target's test.log (why it wrote no XML: a timeout, a crash)."""
    try:
        with open(os.path.join(root, "test.log"), errors="replace") as log:
            kept = [line.strip()[:width] for line in log.read().splitlines() if line.strip()]
    except OSError:
        return ""
    return f" -- {' | '.join(kept[-lines:])}" if kept else ""


def count(testlogs, targets=()):
    passed, failed, failures = 0, 0, []
    roots = [testlogs]
    if targets:
        roots = []
        for label in targets:
            root = os.path.join(testlogs, target_dir(label))
            if os.path.isdir(root):
                roots.append(root)
            else:
                failed += 1
                failures.append(f"{label} (no test log)")
    for root, _, files in (entry for top in roots for entry in os.walk(top, followlinks=True)):
        if "test.log" not in files:
            continue
        target = os.path.relpath(root, testlogs)
        xml_path = os.path.join(root, "test.xml")
        try:
            tree = ET.parse(xml_path)
        except (OSError, ET.ParseError):
            failed += 1
            failures.append(f"{target} (no readable test.xml){log_tail(root)}")
            continue
        cases = list(tree.iter("testcase"))
        for case in cases:
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(f"{target}: {case.get('classname', '')}.{case.get('name', '')}"
                                f"{first_lines(case)}")
            elif case.get("result") == "suppressed" or case.find("skipped") is not None:
                continue
            else:
                passed += 1
        if not cases:
            failed += 1
            failures.append(f"{target} (no test case ran)")
    return passed, failed, failures


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    passed, failed, failures = count(sys.argv[1], sys.argv[3:])
    for failure in failures:
        print(f"FAILED: {failure}")
    prefix = f"{sys.argv[2]}: " if len(sys.argv) >= 3 else ""
    print(f"{prefix}{passed} passed, {failed} failed")


if __name__ == "__main__":
    main()
