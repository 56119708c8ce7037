#!/usr/bin/env bash
# header_test: a program compiled against softrpma's api/include/librpma.h and one compiled
# against the distro's /usr/include/librpma.h see the same API:
#   * the same RPMA_* names (macros and enum constants), every one covered by abi_layout.c;
#   * the same values and the same sizes / alignments / member offsets (abi_layout.c built both
#     ways, outputs diffed);
#   * the same functions with compatible types: every declaration of ours (decls.py) is repeated
#     in a C file that includes the distro's header, which C rejects on any type mismatch, and
#     both headers declare the same function names.
# Skipped (with a message) when librpma-dev is not installed: `./run test` installs it.
set -euo pipefail
root="${TEST_SRCDIR}/${TEST_WORKSPACE}"
source "$root/tests/dropin/testlib.sh"
[[ -e /usr/include/librpma.h ]] ||
  skip_test "/usr/include/librpma.h is missing: install librpma-dev (./run test does)"

ours_dir="$root/api/include"
work="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() {
  echo "FAILED: $1"
  failures=$((failures + 1))
}

# rpma_names [-I DIR]: every RPMA_* macro name and enum constant the header defines.
rpma_names() {
  {
    echo '#include <librpma.h>' | cc "$@" -dM -E -x c - |
      sed -n 's/^#define \(RPMA_[A-Z0-9_]*\).*/\1/p'
    # After preprocessing every macro is expanded: the RPMA_* tokens left are enum constants.
    echo '#include <librpma.h>' | cc "$@" -E -x c - | grep -oE '\bRPMA_[A-Z0-9_]+\b'
  } | sort -u
}

echo "== RPMA_* names"
rpma_names -I "$ours_dir" >"$work/names.ours"
rpma_names >"$work/names.distro"
diff "$work/names.distro" "$work/names.ours" ||
  fail "RPMA_* names differ (< distro, > softrpma)"
while read -r name; do
  grep -qw "$name" "$root/tests/dropin/abi_layout.c" || fail "abi_layout.c does not print $name"
done < <(sort -u "$work/names.ours" "$work/names.distro")
echo "$(wc -l <"$work/names.ours") names"

echo "== values and layouts"
cc -std=c11 -Wall -Wextra -Werror -I "$ours_dir" -MD -MF "$work/ours.d" \
  "$root/tests/dropin/abi_layout.c" -o "$work/abi_ours"
cc -std=c11 -Wall -Wextra -Werror -MD -MF "$work/distro.d" \
  "$root/tests/dropin/abi_layout.c" -o "$work/abi_distro"
grep -qF "$ours_dir/librpma.h" "$work/ours.d" || fail "abi_ours did not use our header"
grep -qF " /usr/include/librpma.h" "$work/distro.d" || fail "abi_distro did not use the distro's"
"$work/abi_ours" >"$work/abi.ours"
"$work/abi_distro" >"$work/abi.distro"
diff "$work/abi.distro" "$work/abi.ours" || fail "values or layouts differ (< distro, > softrpma)"
echo "$(wc -l <"$work/abi.ours") values and layouts"

echo "== function declarations"
python3 "$root/tests/dropin/decls.py" "$ours_dir" >"$work/decls.ours"
python3 "$root/tests/dropin/decls.py" >"$work/decls.distro"
# A declaration's name is the identifier before its first "(" (return types have none).
first_names() {
  grep -v '^typedef' "$1" | sed -E 's/^[^(]*[^a-z0-9_](rpma_[a-z0-9_]+) *\(.*/\1/' | sort
}
first_names "$work/decls.ours" >"$work/functions.ours"
first_names "$work/decls.distro" >"$work/functions.distro"
diff "$work/functions.distro" "$work/functions.ours" ||
  fail "declared functions differ (< distro, > softrpma)"
{
  echo '#include <librpma.h>'
  echo '/* softrpma'"'"'s declarations, repeated after the distro'"'"'s: */'
  sed 's/$/;/' "$work/decls.ours"
} >"$work/redeclare.c"
cc -std=c11 -Wall -Wextra -Werror -c "$work/redeclare.c" -o "$work/redeclare.o" ||
  fail "a softrpma declaration conflicts with the distro's (see the compiler's message above)"
echo "$(wc -l <"$work/functions.ours") functions"

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS"
