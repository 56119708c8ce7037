#!/usr/bin/env bash
# shellcheck disable=SC2317  # (finish and on_signal run from traps)
# softrpma-pair.sh: a server and a client as two processes on one simulated fabric, the command
# of softrpma_add_pair_test (softrpma-config.cmake, docs/CI.md "CMake / CTest"), which runs it
# under `rpma-sim run` so that both sides get the simulated NIC. Installed beside the config, as
# <prefix>/lib/cmake/softrpma/softrpma-pair.sh.
#
#   softrpma-pair.sh TIMEOUT_S N SERVER_WORD... CLIENT_WORD...
#
# Starts the server (the first N words: its program and arguments), waits until it listens (a
# listener appears on the fabric RPMA_SIM_FABRIC names: /proc/net/unix holds
# @softrpma/<fabric>/<address>, docs/FABRIC.md), then starts the client (the other words).
# Exits 0 when both exit 0. When one of them fails (exits non-zero or is killed by a signal),
# or TIMEOUT_S seconds pass, the other is stopped and the script exits 1; its last line names
# the side that failed and how. Each side runs in a process group of its own (what it forks is
# stopped with it), with RPMA_SIM_ROLE=server or client (fault rules and traces name it:
# prog=server). No process of either outlives the script: whenever it exits (on SIGTERM, SIGINT
# and SIGHUP too), what is left of both groups gets SIGTERM, and SIGKILL kGraceSeconds later.
# Each side's output is printed when both have ended.
set -u

kGraceSeconds=3
me="softrpma-pair"

if (($# < 4)) || [[ ! "$1" =~ ^[1-9][0-9]*$ ]] || [[ ! "$2" =~ ^[1-9][0-9]*$ ]] ||
  (($2 >= $# - 2)); then
  echo "usage: softrpma-pair.sh TIMEOUT_S N SERVER_WORD... CLIENT_WORD... (N server words)" >&2
  exit 2
fi
timeout_s="$1"
server_words="$2"
shift 2
server_argv=("${@:1:server_words}")
client_argv=("${@:server_words+1}")
# The test's fabric (softrpma_add_pair_test sets it); alone, one of its own.
export RPMA_SIM_FABRIC="${RPMA_SIM_FABRIC:-pair-$$}"

dir="$(mktemp -d "${TMPDIR:-/tmp}/softrpma-pair.XXXXXX")" || exit 1
declare -A pid=()     # each started side's pid, which is its process group's
declare -A status=()  # each ended side's exit status
verdict=""            # the last line: what failed, or that both passed

# How ROLE ended: "exit N" or "killed by SIGNAME (status N)".
how() {
  local s="${status[$1]}" signal
  if ((s > 128)) && signal="$(kill -l "$((s - 128))" 2>/dev/null)"; then
    echo "killed by SIG$signal (status $s)"
  else
    echo "exit $s"
  fi
}

# start ROLE WORD...: the side in a process group of its own (job control on for the fork only,
# so that the shell prints no job notices).
start() {
  local role="$1"
  shift
  echo "$me: $role: $(printf '%q ' "$@")"
  set -m
  RPMA_SIM_ROLE="$role" "$@" </dev/null >"$dir/$role.out" 2>&1 &
  pid[$role]=$!
  set +m
}

# ended ROLE: whether the side has exited, its status then in status[ROLE] (bash reaps its
# children as they exit and keeps their status for `wait`).
ended() {
  [[ -z "${status[$1]:-}" ]] || return 0
  ! kill -0 "${pid[$1]}" 2>/dev/null || return 1
  wait "${pid[$1]}"
  status[$1]=$?
}

# Whether the process group of ROLE has a process left.
group_alive() { [[ -n "${pid[$1]:-}" ]] && kill -0 -- "-${pid[$1]}" 2>/dev/null; }

# Stops what is left of both sides, prints their output, then the verdict.
finish() {
  local role tenths=0 left=()
  for role in server client; do
    group_alive "$role" && kill -TERM -- "-${pid[$role]}" 2>/dev/null && left+=("$role")
  done
  while ((${#left[@]} > 0 && tenths < kGraceSeconds * 10)); do
    group_alive server || group_alive client || break
    sleep 0.1
    tenths=$((tenths + 1))
  done
  for role in "${left[@]}"; do
    if group_alive "$role"; then
      echo "$me: the $role was still running ${kGraceSeconds} s after SIGTERM: SIGKILL"
      kill -KILL -- "-${pid[$role]}" 2>/dev/null
    fi
    wait "${pid[$role]}" 2>/dev/null  # (bash's own line about the signal: not wanted)
  done
  for role in server client; do
    [[ -e "$dir/$role.out" ]] || continue
    echo "--- $role output ---"
    cat "$dir/$role.out"
  done
  rm -rf "$dir"
  [[ -z "$verdict" ]] || echo "$me: $verdict"
}
trap finish EXIT

# fail MESSAGE...: the verdict; exits 1 (finish stops what still runs).
fail() {
  verdict="FAILED: $*"
  exit 1
}

# A signal to the script (ctest's timeout, ^C): both sides are stopped.
on_signal() {
  verdict="FAILED: stopped by SIG$1 (the server and the client with it)"
  finish
  trap - EXIT
  exit $((128 + $(kill -l "$1")))
}
trap 'on_signal TERM' TERM
trap 'on_signal INT' INT
trap 'on_signal HUP' HUP

deadline=$((SECONDS + timeout_s))
echo "$me: fabric $RPMA_SIM_FABRIC, timeout ${timeout_s} s"
start server "${server_argv[@]}"

# Until the server listens on the test's fabric (any listener there is the server's; not the
# endpoint a verbs QP made without the CM opens, .../ep/..., before the program's own listener).
if [[ -r /proc/net/unix ]]; then
  while ! grep -F "@softrpma/$RPMA_SIM_FABRIC/" /proc/net/unix | grep -qvF "/ep/"; do
    ! ended server || fail "the server ended ($(how server)) before it listened; no client started"
    ((SECONDS < deadline)) ||
      fail "the server did not listen within ${timeout_s} s; it was stopped, no client started"
    sleep 0.05
  done
else
  echo "$me: no /proc/net/unix to see the server listen: the client starts 1 s after it"
  sleep 1
fi
start client "${client_argv[@]}"

# Until both have ended, or one failed, or the time is up.
while true; do
  ended client
  ended server
  for role in client server; do
    [[ "${status[$role]:-0}" != 0 ]] || continue
    other="$([[ "$role" == client ]] && echo server || echo client)"
    if [[ -z "${status[$other]:-}" ]]; then
      fail "the $role failed ($(how "$role")); the $other was stopped"
    elif [[ "${status[$other]}" == 0 ]]; then
      fail "the $role failed ($(how "$role")) after the $other exited 0"
    fi
    fail "the server ($(how server)) and the client ($(how client)) both failed"
  done
  [[ -z "${status[server]:-}" || -z "${status[client]:-}" ]] || break
  if ((SECONDS >= deadline)); then
    running=()
    for role in server client; do
      [[ -n "${status[$role]:-}" ]] || running+=("the $role (pid ${pid[$role]})")
    done
    fail "timed out after ${timeout_s} s:" \
      "${running[0]}${running[1]:+ and ${running[1]}} still running; stopped"
  fi
  sleep 0.05
done
verdict="passed: the server and the client exited 0"
exit 0
