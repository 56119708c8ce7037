#!/bin/bash
# Milestone A of the verbs shim: Debian's ibv_devices and ibv_devinfo (ibverbs-utils, built
# against rdma-core 44, not rebuilt) list the simulated device when the shim's directory is on
# LD_LIBRARY_PATH, as the active device profile (RPMA_SIM_DEVICE) has it; a malformed
# RPMA_SIM_* variable is a clear error, never a crash.
# Usage: devinfo_test.sh <lib/libibverbs.so.1 of //simverbs/shim:verbs_lib_dir>
set -u
# shellcheck source=simverbs/shim/testlib.sh
source "$(dirname "$0")/testlib.sh"
shim_test_init "$1"
require_tools ibverbs-utils ibv_devices ibv_devinfo

run() {  # run <name> <env...> -- <command...>: output in $dir/<name>.{out,err,rc}, 20 s at most
  local name="$1"; shift
  local envs=()
  while [[ "$1" != "--" ]]; do envs+=("$1"); shift; done
  shift
  env -u RPMA_SIM_DEVICE -u RPMA_SIM_FAULTS -u RPMA_SIM_SCENARIO -u RPMA_SIM_TRACE \
    LD_LIBRARY_PATH="$libdir" "${envs[@]}" timeout 20 "$@" >"$dir/$name.out" 2>"$dir/$name.err"
  echo $? >"$dir/$name.rc"
}
rc() { cat "$dir/$1.rc"; }
# A clean failure: non-zero, neither timeout's 124 nor a signal's 128 + n (the tools exit 255
# for a -1 from main).
failed_cleanly() {
  local r
  r="$(rc "$1")"
  [[ "$r" != 0 && "$r" != 124 ]] && ! ((r > 128 && r <= 192))
}
has() {  # has <name> <extended regex>: the output of run <name> has a line matching it
  grep -Eq -- "$2" "$dir/$1.out" || fail "$1: no line matches '$2'; output:
$(cat "$dir/$1.out" "$dir/$1.err")"
}

# ibv_devices: one device, the node GUID ibv_query_device gives.
run devices -- ibv_devices
[[ "$(rc devices)" == 0 ]] || fail "ibv_devices exited $(rc devices): $(cat "$dir/devices.err")"
has devices '^[[:space:]]+softrpma_sim0[[:space:]]+0000000000000001$'
[[ "$(grep -c softrpma "$dir/devices.out")" == 1 ]] || fail "ibv_devices: not exactly one device"

# ibv_devinfo: the default profile (mlx5: an InfiniBand transport) on a RoCE port.
run devinfo -- ibv_devinfo
[[ "$(rc devinfo)" == 0 ]] || fail "ibv_devinfo exited $(rc devinfo): $(cat "$dir/devinfo.err")"
has devinfo '^hca_id:[[:space:]]+softrpma_sim0$'
has devinfo 'transport:[[:space:]]+InfiniBand \(0\)$'
has devinfo 'phys_port_cnt:[[:space:]]+1$'
has devinfo 'port:[[:space:]]+1$'
has devinfo 'state:[[:space:]]+PORT_ACTIVE \(4\)$'
has devinfo 'max_mtu:[[:space:]]+4096 \(5\)$'
has devinfo 'active_mtu:[[:space:]]+1024 \(3\)$'
has devinfo 'link_layer:[[:space:]]+Ethernet$'

# ibv_devinfo -v: the device limits of the profile, the port's tables and its one GID.
run verbose -- ibv_devinfo -v
[[ "$(rc verbose)" == 0 ]] || fail "ibv_devinfo -v exited $(rc verbose): $(cat "$dir/verbose.err")"
has verbose 'max_qp_wr:[[:space:]]+16384$'
# Each profile reports the vendor of the device it models (docs/DEVICES.md): Mellanox's
# ConnectX-5 here, the kernel drivers' own ids for rxe and siw below.
has verbose 'vendor_id:[[:space:]]+0x02c9$'
has verbose 'vendor_part_id:[[:space:]]+4119$'
has verbose 'max_sge:[[:space:]]+32$'
has verbose 'phys_state:[[:space:]]+LINK_UP \(5\)$'

# port_is <name> <max_mtu> <active_mtu> <max_msg_sz> <port_cap_flags> <pkey_tbl_len>
#   <gid_tbl_len> <width> <speed>: the port of run <name> (ibv_devinfo -v) has each profile's
# values (docs/DEVICES.md, "The port"), an Ethernet port whose one GID, the process's own
# ::ffff:127.a.b.c (a.b.c from its pid; shim.h), is index 0 of a table otherwise empty.
port_is() {
  local name="$1"
  has "$name" "max_mtu:[[:space:]]+$2\$"
  has "$name" "active_mtu:[[:space:]]+$3\$"
  has "$name" 'link_layer:[[:space:]]+Ethernet$'
  has "$name" "max_msg_sz:[[:space:]]+$4\$"
  has "$name" "port_cap_flags:[[:space:]]+$5\$"
  has "$name" "pkey_tbl_len:[[:space:]]+$6\$"
  has "$name" "gid_tbl_len:[[:space:]]+$7\$"
  has "$name" "active_width:[[:space:]]+$8\$"
  has "$name" "active_speed:[[:space:]]+$9\$"
  has "$name" 'GID\[  0\]:[[:space:]]+::ffff:127\.[0-9]+\.[0-9]+\.[0-9]+, RoCE v2$'
  [[ "$(grep -c 'GID\[' "$dir/$name.out")" == 1 ]] ||
    fail "$name: not exactly one GID shown: $(grep 'GID\[' "$dir/$name.out")"
}
# mlx5: a ConnectX-5 at 100 Gb/s as RoCE (mlx5_query_port_roce).
port_is verbose '4096 \(5\)' '1024 \(3\)' 0x40000000 0x04010000 1 256 '4X \(2\)' \
  '25\.0 Gbps \(32\)'

# RPMA_SIM_DEVICE picks the profile: siw is iWARP.
run siw RPMA_SIM_DEVICE=siw -- ibv_devinfo -v
[[ "$(rc siw)" == 0 ]] || fail "ibv_devinfo (siw) exited $(rc siw): $(cat "$dir/siw.err")"
has siw 'transport:[[:space:]]+iWARP \(1\)$'
has siw 'vendor_id:[[:space:]]+0x626d74$'
# siw_query_port: both MTUs the netdev's (1500 bytes: 1024), no pkey table, max_msg_sz -1.
port_is siw '1024 \(3\)' '1024 \(3\)' 0xffffffff 0x00090000 0 1 '1X \(1\)' '2\.5 Gbps \(1\)'
run rxe RPMA_SIM_DEVICE=rxe -- ibv_devinfo -v
has rxe 'max_inline_data|max_qp_wr:[[:space:]]+'  # starts and answers
[[ "$(rc rxe)" == 0 ]] || fail "ibv_devinfo (rxe) exited $(rc rxe): $(cat "$dir/rxe.err")"
has rxe 'vendor_id:[[:space:]]+0xffffff$'
# rxe_param.h's port parameters.
port_is rxe '4096 \(5\)' '1024 \(3\)' 0x800000 0x00010000 1 1024 '1X \(1\)' '2\.5 Gbps \(1\)'

# A device or port that does not exist: the tool's own error, exit status not a signal.
run nodev -- ibv_devinfo -d mlx5_0
failed_cleanly nodev || fail "ibv_devinfo -d mlx5_0 exited $(rc nodev)"
grep -q "mlx5_0" "$dir/nodev.err" ||
  fail "ibv_devinfo -d mlx5_0 did not say why: $(cat "$dir/nodev.err")"
run noport -- ibv_devinfo -i 2
failed_cleanly noport || fail "ibv_devinfo -i 2 exited $(rc noport)"

# A malformed RPMA_SIM_DEVICE: no device list, the simulator's message naming the variable.
for tool in ibv_devices ibv_devinfo; do
  run "bad_$tool" RPMA_SIM_DEVICE=bogus -- "$tool"
  failed_cleanly "bad_$tool" ||
    fail "$tool with RPMA_SIM_DEVICE=bogus exited $(rc "bad_$tool")"
  grep -q 'RPMA_SIM_DEVICE: unknown device "bogus"' "$dir/bad_$tool.err" ||
    fail "$tool with RPMA_SIM_DEVICE=bogus: $(cat "$dir/bad_$tool.err")"
  grep -q 'Failed to get IB devices list: Invalid argument' "$dir/bad_$tool.err" ||
    fail "$tool with RPMA_SIM_DEVICE=bogus: no EINVAL from ibv_get_device_list"
done

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "PASS: ibv_devices and ibv_devinfo list softrpma_sim0 through the shim"
