#!/usr/bin/env python3
"""Counts the test cases of a `bazel test` run from the JUnit XML files it wrote.

Usage: count_tests.py BAZEL_TESTLOGS_DIR [LABEL]
Prints one line, `LABEL: N passed, N failed` (no label: `N passed, N failed`), and lists every
failed test case above it. A test target whose XML is missing or unreadable (it crashed before
writing it) counts as one failed case, so a crash can never hide as "0 failed".
"""

import os
import sys
import xml.etree.ElementTree as ET


def count(testlogs):
    passed, failed, failures = 0, 0, []
    for root, _, files in os.walk(testlogs, followlinks=True):
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
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    passed, failed, failures = count(sys.argv[1])
    for failure in failures:
        print(f"FAILED: {failure}")
    prefix = f"{sys.argv[2]}: " if len(sys.argv) == 3 else ""
    print(f"{prefix}{passed} passed, {failed} failed")


if __name__ == "__main__":
    main()
