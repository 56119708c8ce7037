#!/usr/bin/env bash
# Golden fingerprints (issue 19, item 6): what the simulator does, pinned, so that a change
# meant to move code (a refactor of simverbs/sim, of rpma-sim) is shown to change no behaviour.
# golden_fingerprints.sh computes the trace fingerprints of sim_trace_program (seeds 1, 2) and
# of the demo (plain; reusing a buffer early, seeds 1 to 3), and the class of every run of a
# fault sweep of the demo; this test fails unless they equal testdata/golden/, and then prints
# the difference and the command that rewrites testdata/golden/ (for a change of behaviour that
# is meant).
set -uo pipefail
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "${TEST_SRCDIR}/${TEST_WORKSPACE}/tools/rpma_sim/testdata/testlib.sh"
golden="$testdata/golden"
now="$work/golden-now"

# Args (BUILD): rpma-sim, the demo, sim_trace_program.
run "$root/tools/rpma_sim/golden_fingerprints.sh" "$@" "$now"
expect_status "golden_fingerprints.sh ran" 0 "$status"
if [[ "$status" != 0 ]]; then
  echo "golden_fingerprints.sh failed, so nothing was compared; its stderr:"
  echo "$err"
  finish
  exit 1
fi

for name in fingerprints.txt demo_sweep_classes.txt; do
  if diff_out="$(diff -u --label "testdata/golden/$name (golden)" --label "$name (now)" \
    "$golden/$name" "$now/$name")"; then
    pass "$name equals testdata/golden/$name"
  else
    fail "$name equals testdata/golden/$name" "the behaviour changed"
    echo "----- diff (- golden, + now):"
    echo "$diff_out"
    echo "-----"
    changed=1
  fi
done
if [[ -n "${changed:-}" ]]; then
  cat <<'MSG'
The simulator's behaviour differs from tools/rpma_sim/testdata/golden/. If the change was meant
to move code only, it did not: find what changed it. If the behaviour was meant to change,
regenerate the golden files and commit them with the change, saying why:
  tools/rpma_sim/update_golden.sh
MSG
fi

finish
