# shellcheck shell=bash disable=SC2034  # (variables for the tests that source this)
# testlib.sh: sourced by the shim's tests that run Debian's verbs programs (ibv_devinfo, rping,
# ibv_rc_pingpong, perftest) on the shim's directory.
#
#   source "$(dirname "$0")/testlib.sh"
#   shim_test_init "$1"                       # <lib/libibverbs.so.1 of verbs_lib_dir>
#   require_tools ibverbs-utils ibv_devinfo   # the Debian package, the programs it gives
#   use_shim rping                            # a fabric of this run's own, the shim first
#
# It gives: $libdir (the shim's directory), $dir (scratch), fail WHY (counted in $failures),
# and $server_pid, which the EXIT trap kills when a test leaves its server behind.

# Under --config=asan (or tsan) the shim's libraries need their sanitizer runtime loaded first,
# which a program built without it does not do ("ASan runtime does not come first"): preload
# it for them, and do not hold those programs' own leaks against the shim.
preload_sanitizer_runtime() {  # <the shim's libibverbs.so.1>
  local runtimes
  runtimes="$(ldd "$1" | awk '/lib(asan|ubsan|tsan)\.so/ {print $3}' | paste -sd: -)"
  [[ -n "$runtimes" ]] || return 0
  export LD_PRELOAD="$runtimes${LD_PRELOAD:+:$LD_PRELOAD}"
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
}

fail() { echo "FAILED: $*"; failures=$((failures + 1)); }

_kill_server() { [[ -n "${server_pid:-}" ]] && kill "$server_pid" 2>/dev/null; }

shim_test_init() {  # <the shim's libibverbs.so.1>
  libdir="$(cd "$(dirname "$1")" && pwd)"
  preload_sanitizer_runtime "$libdir/libibverbs.so.1"
  dir="${TEST_TMPDIR:-$(mktemp -d)}"
  failures=0
  server_pid=""
  trap _kill_server EXIT
}

require_tools() {  # <package> <program>...: exits (failed) when one is not installed
  local package="$1" tool
  shift
  for tool in "$@"; do
    if ! command -v "$tool" >/dev/null; then
      echo "FAILED: $tool is not installed (package $package: tools/ci/install_deps.sh)"
      exit 1
    fi
  done
}

# The shim's directory alone on LD_LIBRARY_PATH, a fabric of this run's own (fabric names are
# per run: parallel tests do not meet), and none of the inherited RPMA_SIM_* steering.
use_shim() {  # <name of the test>
  export RPMA_SIM_FABRIC="shim-$1-$$-${RANDOM}"
  export LD_LIBRARY_PATH="$libdir"
  unset RPMA_SIM_DEVICE RPMA_SIM_FAULTS RPMA_SIM_SCENARIO RPMA_SIM_TRACE
}

# Waits (10 s at most) until the server <pid> listens: <needle> appears in <table>
# (/proc/net/unix for a simulated listener, "@softrpma/<fabric>/<addr>:<port>"; /proc/net/tcp for
# a program's own TCP exchange, ":<PORT in hex> 00000000:0000 0A"). Fails (returns 1) when the
# server exited first or never listened.
wait_listening() {  # <table> <needle> <pid>
  local tries
  for ((tries = 0; tries < 100; tries++)); do
    grep -qF "$2" "$1" && return 0
    kill -0 "$3" 2>/dev/null || return 1
    sleep 0.1
  done
  return 1
}

# run_server_client <name> <table> <needle> <server command...> -- <client command...>: the
# server (under `timeout 60`, output in $dir/<name>.server.out) and, once it listens
# (wait_listening <table> <needle>), the client (`timeout 30`, $dir/<name>.client.out); fails
# unless both exit 0. The caller checks what they printed.
run_server_client() {
  local name="$1" table="$2" needle="$3"
  shift 3
  local server=()
  while (($# > 0)) && [[ "$1" != "--" ]]; do
    server+=("$1")
    shift
  done
  shift
  timeout 60 "${server[@]}" >"$dir/$name.server.out" 2>&1 &
  server_pid=$!
  wait_listening "$table" "$needle" "$server_pid" ||
    fail "$name: the server did not listen ($needle): $(cat "$dir/$name.server.out")"
  timeout 30 "$@" >"$dir/$name.client.out" 2>&1
  local client_rc=$?
  wait "$server_pid"
  local server_rc=$?
  server_pid=""
  [[ "$client_rc" == 0 ]] || fail "$name: client exited $client_rc: $(cat "$dir/$name.client.out")"
  [[ "$server_rc" == 0 ]] || fail "$name: server exited $server_rc: $(cat "$dir/$name.server.out")"
}

# The /proc/net/tcp needle of a listening IPv4 socket on <port>.
tcp_listen_needle() { printf ':%04X 00000000:0000 0A' "$1"; }
