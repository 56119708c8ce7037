#!/usr/bin/env python3
"""Counts the test cases of a `bazel test` run from the JUnit XML files it wrote.

Usage: count_tests.py BAZEL_TESTLOGS_DIR [LABEL [TARGET...]]
Prints one line, `LABEL: N passed, N failed` (no label: `N passed, N failed`), and lists every
failed test case above it. A test target whose XML is missing or unreadable (it crashed before
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
            failures.append(f"{target} (no readable test.xml)")
            continue
        cases = list(tree.iter("testcase"))
        for case in cases:
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
                failures.append(f"{target}: {case.get('classname', '')}.{case.get('name', '')}")
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
