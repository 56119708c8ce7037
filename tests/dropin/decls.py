#!/usr/bin/env python3
"""Prints the function declarations (and function typedefs) of a librpma.h, one per line.

Usage: decls.py [INCLUDE_DIR]
Runs the C preprocessor on `#include <librpma.h>` (from INCLUDE_DIR when given, else the
system's), keeps only the text that came from librpma.h itself (not from verbs.h or the C
library) and prints each top-level declaration that declares an rpma_* function or a typedef
of one, whitespace-normalized, without its `;`. header_test.sh redeclares softrpma's in a file
that includes the distro's header: C rejects a redeclaration whose type differs.
"""

import re
import subprocess
import sys


def librpma_text(include_dir):
    command = ["cc", "-E", "-x", "c", "-"]
    if include_dir:
        command[1:1] = ["-I", include_dir]
    out = subprocess.run(command, input="#include <librpma.h>\n", capture_output=True,
                         text=True, check=True).stdout
    kept, inside = [], False
    for line in out.splitlines():
        marker = re.match(r'^# \d+ "([^"]*)"', line)
        if marker:
            inside = marker.group(1).endswith("/librpma.h")
        elif inside and not line.startswith("#"):
            kept.append(line)
    return " ".join(kept)


def main():
    if len(sys.argv) > 2:
        sys.exit(__doc__)
    text = librpma_text(sys.argv[1] if len(sys.argv) == 2 else "")
    for statement in text.split(";"):
        statement = " ".join(statement.split())
        if "{" in statement or "}" in statement:
            continue  # a struct or enum definition (or a piece of one)
        if re.search(r"\brpma_\w+\s*\(", statement):
            print(statement)


if __name__ == "__main__":
    main()
