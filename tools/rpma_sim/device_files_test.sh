#!/bin/bash
# `rpma-sim run --device-files` (device_files.h): the run's processes see the device node and
# sysfs entries a kernel driver would make, the rest of the machine does not, everything /dev
# and /sys/class held stays usable inside, both as root (a mount namespace) and on the path of
# an unprivileged user (a user namespace with the caller's own ids); where namespaces are
# refused it is an error and the program does not run; a bad test knob is an error too. With
# UCX installed (ucx-utils): ucx_info -d lists softrpma_sim0 with rc_verbs and ud_verbs, two
# ucx_perftest processes finish a UCT active-message ping-pong over rc_verbs on the simulated
# NIC, and a UCP tag-matching ping-pong (tag_lat, which UCP wires up over ud_verbs) over
# rc_verbs + ud_verbs.
set -u
# shellcheck source=tools/rpma_sim/testdata/testlib.sh
source "$(dirname "$0")/testdata/testlib.sh"
export RPMA_SIM_FABRIC="device-files-$$-$RANDOM"
node=/dev/infiniband/uverbs_softrpma0
sysdev=/sys/class/infiniband/softrpma_sim0
node_before=no
[[ -e "$node" ]] && node_before=yes

inside='test -c '"$node"' && test -r '"$node"' && test -w '"$node"' && echo node-ok
cat '"$sysdev"'/ports/1/gid_attrs/types/0 '"$sysdev"'/ports/1/gid_attrs/ndevs/0
cat /sys/class/infiniband_verbs/uverbs_softrpma0/ibdev
ls '"$sysdev"'/device/net
echo data > /dev/null && head -c 4 /dev/zero | wc -c
test -d /sys/class/net/lo && echo net-kept
f=/dev/shm/device-files-test-$$; echo shm > "$f" && cat "$f" && rm "$f"
id -u'

namespaces=yes
if ! unshare -m true 2>/dev/null && ! unshare -U -m true 2>/dev/null; then
  # This machine refuses both: the run must say so and not start (checked below as "refused").
  echo "SKIP (root, userns): this machine refuses mount and user namespaces"
  namespaces=no
  run "$rpma_sim" run --device-files -- true
  expect_status "no namespaces here: exit 2" 2 "$status"
  expect_in "no namespaces here: says why" "$err" "rpma-sim: --device-files: cannot enter"
fi

for mode in root userns; do
  [[ "$namespaces" == yes ]] || break
  knob=0
  if [[ "$mode" == userns ]]; then
    if [[ "$(id -u)" != 0 ]] || ! unshare -U true 2>/dev/null; then
      echo "SKIP ($mode): needs root and user namespaces here"
      continue
    fi
    knob=1
  elif [[ "$(id -u)" != 0 ]]; then
    echo "SKIP ($mode): not root"
    continue
  fi
  run env RPMA_SIM_DEVICE_FILES_USERNS="$knob" "$rpma_sim" run --device-files -- sh -c "$inside"
  expect_status "$mode: the run exits 0" 0 "$status"
  expect_in "$mode: the device node, a char device anyone may read and write" "$out" "node-ok"
  expect_in "$mode: the port's GID type" "$out" "RoCE v2"
  expect_in "$mode: the GID's net device, and device/net" "$out" $'lo\nsoftrpma_sim0\nlo'
  expect_in "$mode: /dev/null and /dev/zero still work" "$out" $'\n4\n'
  expect_in "$mode: /sys/class keeps what it held" "$out" "net-kept"
  expect_in "$mode: /dev/shm still works" "$out" $'\nshm\n'
  expect_in "$mode: the caller keeps its uid" "$out" $'\n'"$(id -u)"
  if [[ "$node_before" == no ]]; then
    check "$mode: nothing is left outside the run" test ! -e "$node"
  fi
done

# Refused: no CAP_SYS_ADMIN (and, as root, no user namespace helps): an error, nothing runs.
if [[ "$(id -u)" == 0 ]] && command -v setpriv >/dev/null; then
  marker="$work/ran"
  run setpriv --bounding-set=-sys_admin --inh-caps=-sys_admin \
    "$rpma_sim" run --device-files -- touch "$marker"
  expect_status "refused: exit 2" 2 "$status"
  expect_in "refused: says what was refused" "$err" "rpma-sim: --device-files: cannot enter"
  check "refused: the program did not run" test ! -e "$marker"
fi

run env RPMA_SIM_DEVICE_FILES_USERNS=yes "$rpma_sim" run --device-files -- true
expect_status "bad knob: exit 2" 2 "$status"
expect_in "bad knob: named" "$err" 'RPMA_SIM_DEVICE_FILES_USERNS: bad value "yes": expected 0 or 1'

if [[ "$namespaces" == no ]]; then
  echo "SKIP (UCX): needs --device-files, which this machine refuses"
  finish
  exit
fi
# Under --config=asan / tsan the shim is built with a sanitizer whose runtime must be loaded
# first, which UCX's programs (not built with it) do not do.
shim="$root/simverbs/shim/lib/libibverbs.so.1"
if [[ -e "$shim" ]] && ldd "$shim" | grep -Eq 'lib(asan|tsan|ubsan)\.so'; then
  echo "SKIP (UCX): the shim is built with a sanitizer; UCX's programs cannot load it"
  finish
  exit
fi
if ! command -v ucx_info >/dev/null || ! command -v ucx_perftest >/dev/null; then
  echo "SKIP (UCX): ucx-utils is not installed (tools/ci/install_deps.sh installs it)"
  finish
  exit
fi
run "$rpma_sim" run --device-files -- ucx_info -d
expect_status "ucx_info -d exits 0" 0 "$status"
expect_in "ucx_info -d lists the device's memory domain" "$out" "# Memory domain: softrpma_sim0"
expect_in "ucx_info -d lists rc_verbs on it" "$out" $'#      Transport: rc_verbs\n#         Device: softrpma_sim0:1'
expect_in "ucx_info -d lists ud_verbs on it" "$out" $'#      Transport: ud_verbs\n#         Device: softrpma_sim0:1'

port=$((20000 + RANDOM % 20000))
timeout 60 "$rpma_sim" run --device-files -- ucx_perftest -x rc_verbs -d softrpma_sim0:1 \
  -t am_lat -p "$port" >"$work/ucx_server.out" 2>&1 &
server=$!
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  sleep 0.5
  run "$rpma_sim" run --device-files -- ucx_perftest 127.0.0.1 -p "$port" -x rc_verbs \
    -d softrpma_sim0:1 -t am_lat -n 2000
  contains "$err$out" "Connection refused" || break
done
wait "$server"
server_status=$?
expect_status "ucx_perftest am_lat over rc_verbs: the client exits 0" 0 "$status"
expect_in "ucx_perftest am_lat: the client's final row" "$out" "Final:                  2000"
expect_status "ucx_perftest am_lat: the server exits 0" 0 "$server_status"

# UCP: tag matching, wired up over UD (ud_verbs) and run over RC, between two processes.
port=$((port + 1))
UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=softrpma_sim0:1 \
  timeout 60 "$rpma_sim" run --device-files -- ucx_perftest -t tag_lat -p "$port" \
  >"$work/ucx_tag_server.out" 2>&1 &
server=$!
for attempt in 1 2 3 4 5 6 7 8 9 10; do
  sleep 0.5
  run env UCX_TLS=rc_verbs,ud_verbs,self UCX_NET_DEVICES=softrpma_sim0:1 \
    "$rpma_sim" run --device-files -- ucx_perftest 127.0.0.1 -p "$port" -t tag_lat -n 2000
  contains "$err$out" "Connection refused" || break
done
wait "$server"
server_status=$?
expect_status "ucx_perftest tag_lat over rc_verbs + ud_verbs: the client exits 0" 0 "$status"
expect_in "ucx_perftest tag_lat: the client's final row" "$out" "Final:                  2000"
expect_status "ucx_perftest tag_lat: the server exits 0" 0 "$server_status"
((server_status == 0)) || tail -5 "$work/ucx_tag_server.out"
finish
