// shim.h: the verbs shim, the simulated NIC behind the verbs API itself. Two shared libraries,
// libibverbs.so.1 and librdmacm.so.1, with rdma-core 44's sonames and symbol versions
// (libibverbs.map, librdmacm.map), that a program built against Debian's libibverbs-dev /
// librdmacm-dev loads in place of rdma-core's through LD_LIBRARY_PATH, unrebuilt:
//
//   LD_LIBRARY_PATH=bazel-bin/simverbs/shim/lib ibv_devinfo        (//simverbs/shim:verbs_lib_dir)
//
// THE MODEL. The shim is a face of the simulator, not a second one: every call goes to the sim
// Backend (GetSimBackend(), sim_backend.h) or to the simulated device's context
// (GetSimContext()), with the verbs error conventions put back on top of the Backend's one
// convention (create: NULL + errno; post/notify/destroy/modify: the errno returned;
// ibv_get_cq_event: -1 + errno; ibv_poll_cq: a negative count). The inline verbs
// (ibv_post_send, ibv_post_recv, ibv_post_srq_recv, ibv_poll_cq, ibv_req_notify_cq) never reach
// the shim: verbs.h calls them through context->ops, which the simulator fills
// (SimBackend::InstallContextOps). The inline extended verbs of verbs.h (ibv_create_cq_ex,
// ibv_query_device_ex, ibv_query_port, ibv_alloc_td, ...) look for a struct verbs_context around
// the context: the simulated context is inside one (sim/device.h), whose ops the shim sets on
// first use: query_device_ex (the Backend's, cut to the caller's attr_size), query_port (the
// whole ibv_port_attr), create_cq_ex (the Backend's IbvCreateCqEx: an ibv_cq_ex whose own ops
// serve the inline ibv_start_poll / ibv_next_poll / ibv_end_poll / ibv_wc_read_*, sim/cq.h) and
// create_qp_ex (send_ops_flags give an extended QP whose ibv_wr_* builders the simulator sets:
// sim/qp.h says which ops are modelled). Every other op is NULL, so its inline verb fails with
// EOPNOTSUPP / ENOSYS or takes its legacy path by itself, as on a provider without the feature
// (ibv_alloc_td, ibv_alloc_dm, ibv_open_xrcd, ibv_alloc_parent_domain, ...).
//
// ONE DEVICE. ibv_get_device_list gives one device, "softrpma_sim0", of the profile that
// RPMA_SIM_DEVICE names (mlx5 by default: docs/DEVICES.md); the first call starts the simulated
// NIC and reads the RPMA_SIM_* environment (a malformed variable: NULL + EINVAL, with the
// simulator's message on stderr). ibv_open_device returns the one simulated context each time;
// ibv_close_device does not destroy it (objects of the process stay usable until exit). One
// port, 1, ACTIVE, link layer Ethernet (the simulated NIC is reached at IP addresses through
// rdma_cm, as RoCE and iWARP are), with the profile's port values (MTUs, table lengths,
// capability flags, max_msg_sz, width and speed: sim::PortProfile, docs/DEVICES.md). Its GID
// table holds one GID, at index 0, this process's own ::ffff:127.a.b.c (RoCE v2; a.b.c are the
// low 24 bits of the pid, so every process's GID differs and names it: all of 127/8 is
// loopback, so it is still a local IPv4-mapped address; sim::ProcessGid); its other entries
// are empty (ibv_query_gid: a zero GID, as rdma-core gives for one). Its pkey table, where the
// profile has one (not siw's), holds the default pkey 0xffff.
//
// LINKING. The simulator is inside libibverbs.so.1, statically, built without the ibverbs
// backend (the shim depends on //simverbs/sim:sim_backend, never on //simverbs:backend_registry),
// and the simulator's code calls no libibverbs or librdmacm function, so the shim's
// libibverbs.so.1 has no DT_NEEDED on any libibverbs or librdmacm and cannot recurse into
// itself (shim_libs_test.sh checks both libraries' NEEDED entries). librdmacm.so.1 is thin:
// it needs the shim's libibverbs.so.1 (as rdma-core's librdmacm needs rdma-core's libibverbs)
// and reaches the same simulator through softrpma_shim_backend (version
// SOFTRPMA_SHIM_PRIVATE_1), so that a program using both libraries has one simulated NIC. Only
// the extern "C" functions the version scripts name are exported; everything else (the sim, absl,
// libstdc++'s inline code) is local. softrpma's own librpma.so.0, loaded beside the shim,
// finds the ibv_* / rdma_* functions its ibverbs backend uses here (librpma_on_shim_test runs it
// with RPMA_BACKEND=ibverbs). Upstream librpma (Debian's librpma0 1.2) runs on the shim
// unmodified: `rpma-sim run --upstream-librpma` (tools/rpma_sim/sim_env.h), and
// tests/differential diffs its results against softrpma's librpma on the sim backend.
//
// WHAT WORKS on the simulated NIC (libibverbs.so.1):
//   ibv_get_device_list, ibv_free_device_list, ibv_get_device_name, ibv_get_device_guid,
//   ibv_get_device_index, ibv_open_device, ibv_close_device, ibv_query_device, ibv_query_port,
//   ibv_query_gid, ibv_query_gid_type, _ibv_query_gid_ex, _ibv_query_gid_table, ibv_query_pkey,
//   ibv_get_pkey_index, ibv_alloc_pd, ibv_dealloc_pd, ibv_reg_mr, ibv_reg_mr_iova and
//   ibv_reg_mr_iova2 (iova equal to addr), ibv_dereg_mr, ibv_create_comp_channel,
//   ibv_destroy_comp_channel, ibv_create_cq, ibv_destroy_cq, ibv_get_cq_event,
//   ibv_ack_cq_events, ibv_get_async_event, ibv_ack_async_event, ibv_create_srq,
//   ibv_destroy_srq, ibv_qp_to_qp_ex; the strings and rates (ibv_wc_status_str,
//   ibv_event_type_str, ibv_node_type_str, ibv_port_state_str, ibv_rate_to_mult,
//   mult_to_ibv_rate, ibv_rate_to_mbps, mbps_to_ibv_rate); ibv_fork_init,
//   ibv_is_fork_initialized (IBV_FORK_UNNEEDED: no pinned pages), ibv_dontfork_range,
//   ibv_dofork_range; ibv_get_sysfs_path, ibv_read_sysfs_file (real files); the kern-abi copies
//   ibv_copy_qp_attr_from_kern, ibv_copy_ah_attr_from_kern, ibv_copy_path_rec_from_kern,
//   ibv_copy_path_rec_to_kern.
//   ibv_destroy_qp on a QP that rdma_create_qp made (what rdma_destroy_qp does).
//   THE EXTENDED CQ: ibv_create_cq_ex (wc_flags of IBV_WC_STANDARD_FLAGS; comp_mask
//   IBV_CQ_INIT_ATTR_MASK_FLAGS with IBV_CREATE_CQ_ATTR_SINGLE_THREADED), ibv_start_poll,
//   ibv_next_poll, ibv_end_poll, the ibv_wc_read_* of the fields asked for (opcode, vendor_err
//   and wc_flags always), ibv_cq_ex_to_cq and every ibv_cq call on the result (ibv_poll_cq,
//   ibv_req_notify_cq, ibv_get_cq_event, ibv_destroy_cq).
//   QPs WITHOUT THE CM: ibv_create_qp (RC and UD: UC, raw packet, XRC give EOPNOTSUPP),
//   ibv_modify_qp (RESET -> INIT -> RTR -> RTS with the attribute masks the kernel's
//   ib_modify_qp_is_ok demands, any state -> ERR / RESET; the RTR's AV needs a GRH, is_global 1
//   and sgid_index 0, as on any RoCE port: ibv_rc_pingpong needs `-g 0`), ibv_query_qp (what
//   was set) and ibv_destroy_qp. At RTR the QP is bound to (dgid, dest_qp_num): the process of
//   that GID, through the fabric (RPMA_SIM_FABRIC; docs/FABRIC.md), so two processes that
//   exchanged QPN and GID themselves (ibv_rc_pingpong; perftest without -R) talk.
//   ibv_create_qp_ex with IBV_QP_INIT_ATTR_SEND_OPS_FLAGS (and ibv_qp_to_qp_ex of such a QP,
//   or of one rdma_create_qp_ex made so): the extended post API, ibv_wr_start /
//   ibv_wr_complete / ibv_wr_abort with the builders of the RC ops and the SGE / inline setters
//   (sim/qp.h), and on a UD QP ibv_wr_send(_imm) with ibv_wr_set_ud_addr; send_ops_flags naming
//   other ops give EOPNOTSUPP, other comp_mask bits EINVAL.
//   64-BIT ATOMICS where the profile's atomic_cap is IBV_ATOMIC_HCA (mlx5, rxe; siw: EINVAL):
//   IBV_WR_ATOMIC_CMP_AND_SWP / IBV_WR_ATOMIC_FETCH_AND_ADD on ibv_post_send and
//   ibv_wr_atomic_cmp_swp / ibv_wr_atomic_fetch_add, in one process and between processes
//   (perftest's ib_atomic_lat / ib_atomic_bw; docs/DEVICES.md, "64-bit atomics").
//   UD QPs (IBV_QPT_UD; sim/qp.h, "UD QPs") and address handles: ibv_create_ah / ibv_destroy_ah,
//   ibv_init_ah_from_wc / ibv_create_ah_from_wc (rdma-core's reading of the GRH: RoCE v2 over
//   IPv4, or an IPv6 / IB GRH). A send lands behind a 40-byte GRH in a receive of the QP its
//   AH's GID and remote_qpn name, in this process or another of the fabric.
//   rdma_cm's UD path (udaddy): RDMA_PS_UDP ids, whose rdma_create_qp makes a UD QP in RTS,
//   rdma_connect / rdma_accept / rdma_reject as SIDR (ESTABLISHED with param.ud's address,
//   QPN and Q_Key; UNREACHABLE with the SIDR status), in a port space of their own
//   (sim/cm/cm.h, "UD IDS"; docs/DEVICES.md, "UD ids").
// WHAT FAILS CLEANLY, as a provider without the feature (NULL + errno EOPNOTSUPP, or EOPNOTSUPP
// returned): ibv_create_cq_ex asking for a completion timestamp
// (IBV_WC_EX_WITH_COMPLETION_TIMESTAMP, _WALLCLOCK: no device clock), CVLAN, flow tag or
// tag-matching info, or for IBV_CREATE_CQ_ATTR_IGNORE_OVERRUN (an overrun is a CQ error here;
// unknown bits and a parent domain, which the simulator has none of, are EINVAL),
// ibv_query_qp_data_in_order (0: no guarantee), ibv_modify_srq, ibv_query_srq,
// ibv_resize_cq, ibv_rereg_mr, ibv_reg_mr_iova* with iova != addr, ibv_reg_dmabuf_mr,
// multicast (ibv_attach_mcast, ibv_detach_mcast),
// ibv_resolve_eth_l2_from_gid, ibv_query_ece / ibv_set_ece, ibv_import_device / _pd / _mr / _dm
// (ibv_unimport_* do nothing).
// NOT EXPORTED: the compat @IBVERBS_1.0 twins (binaries of libibverbs 1.0) and the provider
// interface of IBVERBS_PRIVATE_34 except ibv_query_gid_type (ibv_devinfo calls it).
//
// librdmacm.so.1: see rdmacm_shim.cc's top comment for what works and what fails.
//
// PROGRAMS THAT RUN (each a test here): ibv_devices / ibv_devinfo (devinfo_test), rping
// (rping_test), ibv_rc_pingpong (rc_pingpong_test), perftest with and without -R, its atomics
// among them (perftest_test), and libfabric 1.17's verbs provider: fi_pingpong -p "verbs;ofi_rxm" -e rdm
// and -p verbs -e msg with data checks, as two processes under `rpma-sim run`
// (fi_pingpong_test), and Open MPI 4.1 over it (`--mca pml cm --mca mtl ofi`,
// FI_PROVIDER=verbs): a two-rank ping-pong that checks its data (mpi_pingpong_test).
// libibverbs.so.1 is NODELETE: the simulator's threads outlive the dlclose of the libraries that
// loaded it (libfabric's provider and Open MPI's components close theirs at MPI_Finalize).
//
// WHERE A PROGRAM MAY SEE A DIFFERENCE from rdma-core on a NIC (known, kept):
//   - rdma_destroy_id of an id with unacknowledged events fails with EBUSY (the simulator's
//     CM, cm.h); rdma-core blocks until they are acknowledged. (An id destroyed with its QP on
//     it goes and leaves the QP for ibv_destroy_qp, as on rdma-core.)
//   - rdma_resolve_addr / rdma_resolve_route take no time, and a SEND's ACK between processes
//     crosses two fabric threads, so a client can outrun a server that listens late: perftest
//     -R's second rdma_connect is then rejected (reason 8, as it would be on a NIC) and
//     perftest's retry reuses the ids it destroyed. perftest_test's clients wait for the
//     listener (connect_when_listening.c).
//   - the siw profile connects QPs out of band through ibv_modify_qp too (real siw needs the
//     CM).
//   - ibv_modify_qp RTS -> RTS on a QP of rdma_create_qp takes the row's optional attributes
//     (min_rnr_timer, access flags, alternate path, migration state) and checks their values,
//     but they change nothing: the simulated CM QP has no alternate path, does not time RNR
//     NAKs, and keeps the remote access rdma_cm gave it.
//   - the PD rdma_create_qp uses when given none (the device's) lives as long as the process's
//     simulated NIC; rdma-core frees its device PD when the device's last id goes.
//
// libmlx5.so.1 and libefa.so.1 (beside them in verbs_lib_dir): stubs of rdma-core's
// direct-verbs provider libraries, which programs such as perftest have in DT_NEEDED (the real
// ones need libibverbs' IBVERBS_PRIVATE_34 provider interface, not exported here). Every
// function of rdma-core 44's (default versions; generated by gen_dv_stubs.py) answers as for
// a device that is not an mlx5 / efa one: mlx5dv_is_supported false, NULL + errno EOPNOTSUPP,
// EOPNOTSUPP returned. They need only libc.
//
// Thread-safety: as the Backend's (backend.h); the device list is made once, under a lock.

#ifndef SOFTRPMA_SIMVERBS_SHIM_SHIM_H_
#define SOFTRPMA_SIMVERBS_SHIM_SHIM_H_

#include "simverbs/backend.h"

extern "C" {

// The process's simulated NIC as a Backend, started on first use; NULL (errno EINVAL, the
// reason on stderr) when the RPMA_SIM_* environment is malformed. Exported by the shim's
// libibverbs.so.1 (SOFTRPMA_SHIM_PRIVATE_1) for its librdmacm.so.1; not for applications.
softrpma::Backend* softrpma_shim_backend(void);

// The QPs rdma_create_qp made, so that ibv_destroy_qp on one of them works as on rdma-core
// (there it is rdma_destroy_qp's own step). Called by the shim's librdmacm.so.1. Thread-safe.
void softrpma_shim_qp_made(ibv_qp* qp, rdma_cm_id* id);
void softrpma_shim_qp_gone(ibv_qp* qp);

}  // extern "C"

#endif  // SOFTRPMA_SIMVERBS_SHIM_SHIM_H_
