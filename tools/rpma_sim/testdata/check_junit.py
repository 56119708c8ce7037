#!/usr/bin/env python3
"""Checks a JUnit XML file the way CI systems read it (Jenkins' and GitLab's parsers, GitHub
Actions' test reporters): valid UTF-8, well-formed XML, <testsuites> holding <testsuite>s of
<testcase>s; the attributes tests, failures, errors, time, name (suites) and name, classname, time
(cases) present and consistent with what the file holds; a failure with a message.

Usage: check_junit.py FILE [--cases=N] [--failures=N] [--failing=NAME]... [--text=NEEDLE]...
Prints what is wrong and exits 1, or prints `ok: N cases, N failures` and exits 0.
--failing: a test case of that name must have a <failure>; --text: some failure's text (or
system-out) must contain NEEDLE.
"""

import sys
import xml.etree.ElementTree as ET


def main():
    args = sys.argv[1:]
    if not args:
        sys.exit(__doc__)
    path, options = args[0], args[1:]
    errors = []
    raw = open(path, "rb").read()
    try:
        raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        errors.append(f"not valid UTF-8: {e}")
    try:
        root = ET.fromstring(raw)
    except ET.ParseError as e:
        print(f"{path}: not well-formed XML: {e}")
        sys.exit(1)
    if root.tag != "testsuites":
        errors.append(f"root element <{root.tag}>, expected <testsuites>")
    for attr in ("name", "tests", "failures", "errors", "time"):
        if attr not in root.attrib:
            errors.append(f"<testsuites> has no {attr} attribute")
    cases, failures, texts, failing = 0, 0, [], set()
    for suite in root:
        if suite.tag != "testsuite":
            errors.append(f"<{suite.tag}> inside <testsuites>, expected <testsuite>")
            continue
        for attr in ("name", "tests", "failures", "errors", "time"):
            if attr not in suite.attrib:
                errors.append(f"<testsuite> has no {attr} attribute")
        suite_cases, suite_failures = 0, 0
        for case in suite:
            if case.tag != "testcase":
                errors.append(f"<{case.tag}> inside <testsuite>, expected <testcase>")
                continue
            suite_cases += 1
            for attr in ("name", "classname", "time"):
                if not case.get(attr):
                    errors.append(f"a <testcase> without {attr}: {case.attrib}")
            try:
                float(case.get("time", "x"))
            except ValueError:
                errors.append(f"time is not a number: {case.attrib}")
            for child in case:
                if child.tag not in ("failure", "error", "skipped", "system-out", "system-err"):
                    errors.append(f"<{child.tag}> inside <testcase>")
                if child.tag in ("system-out", "system-err"):
                    texts.append(child.text or "")
            failure = case.find("failure")
            if failure is not None:
                suite_failures += 1
                failing.add(case.get("name"))
                if not failure.get("message"):
                    errors.append(f"a <failure> without a message in {case.get('name')}")
                texts.append(failure.text or "")
        for attr, count in (("tests", suite_cases), ("failures", suite_failures)):
            if suite.get(attr) != str(count):
                errors.append(f"<testsuite {attr}=\"{suite.get(attr)}\"> holds {count}")
        if suite.get("errors") != "0":
            errors.append("<testsuite errors> is not 0")
        cases += suite_cases
        failures += suite_failures
    for attr, count in (("tests", cases), ("failures", failures)):
        if root.get(attr) != str(count):
            errors.append(f"<testsuites {attr}=\"{root.get(attr)}\"> holds {count}")
    for option in options:
        key, _, value = option.partition("=")
        if key == "--cases" and cases != int(value):
            errors.append(f"{cases} test cases, expected {value}")
        elif key == "--failures" and failures != int(value):
            errors.append(f"{failures} failures, expected {value}")
        elif key == "--failing" and value not in failing:
            errors.append(f"no failing test case named {value!r} (failing: {sorted(failing)})")
        elif key == "--text" and not any(value in t for t in texts):
            errors.append(f"no failure text or output contains {value!r}")
    for e in errors:
        print(f"{path}: {e}")
    if errors:
        sys.exit(1)
    print(f"ok: {cases} cases, {failures} failures")


if __name__ == "__main__":
    main()
