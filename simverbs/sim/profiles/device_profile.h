// device_profile.h: the device profiles (DeviceProfile): what differs between the real RDMA
// devices softrpma's simulated NIC can stand for (mlx5, rxe, siw) and that a librpma program
// can observe: the transport, immediate data, the capabilities and limits ibv_query_device_ex
// reports, how CQ and QP sizes are rounded, and the private data rdma_cm carries. Each value's
// source (driver file, kernel, man page) is in docs/DEVICES.md.
//
// RPMA_SIM_DEVICE names the active profile when the simulated NIC starts (default mlx5);
// tests may switch it with SetActiveProfile(). Thread-safety: every function is thread-safe;
// the profiles are constants.

#ifndef SOFTRPMA_SIMVERBS_SIM_PROFILES_DEVICE_PROFILE_H_
#define SOFTRPMA_SIMVERBS_SIM_PROFILES_DEVICE_PROFILE_H_

#include <infiniband/verbs.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace softrpma::sim {

// The variable that names the profile when the simulated NIC starts.
inline constexpr char kDeviceEnvVar[] = "RPMA_SIM_DEVICE";

// The most scatter/gather entries any profile allows (the size of the simulator's fixed
// per-WR arrays) and the most private data any rdma_conn_param can carry (a uint8_t length).
inline constexpr int kMaxSgeAnyDevice = 32;
inline constexpr int kMaxPrivateDataAnyDevice = 255;

// How a driver rounds a queue size it was asked for (n >= 1) before it reports it back.
enum class QueueRounding : uint8_t {
  kAsAsked,               // reported as asked (n)
  kPowerOfTwo,            // the next power of two >= n
  kPowerOfTwoMinusOne,    // the next power of two >= n + 1, minus one (one slot kept empty)
};

// Returns `n` rounded as `rounding` says. REQUIRES: n >= 0 (0 stays 0).
uint32_t RoundQueueSize(QueueRounding rounding, uint32_t n);

// What ibv_query_port reports for the device's one port (1), an Ethernet port on every profile
// (mlx5 as RoCE, rxe as soft-RoCE, siw as iWARP over TCP). The state (ACTIVE, LINK_UP), the
// link layer, the LIDs and the GID table's contents are every profile's (the verbs shim).
struct PortProfile {
  ibv_mtu max_mtu;
  ibv_mtu active_mtu;     // as on a netdev of 1500 bytes
  int gid_tbl_len;        // entry 0 holds the process's GID, the others are empty
  uint16_t pkey_tbl_len;  // 0: no pkey table (iWARP); else entry 0 holds 0xffff
  uint32_t port_cap_flags;  // IBV_PORT_* bits, as libibverbs receives them
  uint32_t max_msg_sz;
  uint8_t max_vl_num;
  uint8_t active_width;  // IB_WIDTH_* (1: 1X, 2: 4X)
  uint8_t active_speed;  // IB_SPEED_* (1: SDR 2.5 Gb/s, 32: EDR 25 Gb/s)
};

struct DeviceProfile {
  const char* name;         // the RPMA_SIM_DEVICE value: "mlx5", "rxe", "siw"
  const char* description;  // one line, for `rpma-sim devices`
  ibv_transport_type transport;  // ibv_device.transport_type of the context's device
  bool immediate_data;  // whether SEND_WITH_IMM / RDMA_WRITE_WITH_IMM can be posted

  // What ibv_query_device_ex reports as the device's identity (the real device's figures).
  uint32_t vendor_id;
  uint32_t vendor_part_id;
  uint32_t hw_ver;

  // What ibv_query_device_ex reports, and what creation enforces.
  int max_qp_wr;
  int max_sge;
  int max_sge_rd;
  int max_cqe;
  int max_inline_data;  // not in ibv_device_attr: checked at QP creation
  int max_srq_wr;
  int max_srq_sge;
  int max_qp_rd_atom;
  int max_qp_init_rd_atom;
  ibv_atomic_cap atomic_cap;
  bool native_atomic_write;  // the default; RPMA_SIM_NATIVE_ATOMIC_WRITE overrides it
  bool odp;                  // the default; SetOdpSupported overrides it

  // The errno a send WR beyond its QP's max_send_sge, or with inline data beyond its
  // max_inline_data, gets: from ibv_post_send (mlx5 ENOMEM, rxe and siw EINVAL) and from the
  // ibv_wr_* setters, reported by ibv_wr_complete (mlx5 ENOMEM, rxe ENOSPC). ibv_post_recv
  // answers EINVAL for too many SGEs on every profile.
  int post_send_limit_errno;
  int wr_setter_limit_errno;
  // rxe's ibv_post_send refuses a compare-and-swap or fetch-and-add whose remote address is not
  // 8-byte aligned (EINVAL, rxe.c validate_send_wr; its ibv_wr_* builders do not check); mlx5
  // posts it and its responder refuses it (IBV_WC_REM_INV_REQ_ERR), as every profile's does.
  bool atomic_alignment_checked_at_post;

  // What ibv_create_cq reports in cq->cqe and rdma_create_qp_ex in attr->cap.
  QueueRounding cq_rounding;
  QueueRounding send_queue_rounding;
  QueueRounding recv_queue_rounding;
  // rxe: one WQE holds either the SGEs or the inline data, so both are reported as the larger
  // of the two (max_inline_data = max(16 * max_send_sge, max_inline_data), max_send_sge =
  // that / 16).
  bool inline_shares_sge_space;

  // When a work request's queue slot is free again: when its completion is POLLED (mlx5: the
  // provider moves the queue's tail in ibv_poll_cq, and an unsignaled WR's slot goes with the
  // next polled completion), or when the WR COMPLETES (rxe, siw: the kernel consumes the WQE as
  // it completes it, signaled or not, and a receive as it fills it).
  bool slots_freed_at_poll;
  // Whether ibv_destroy_qp, and a move to RESET, take the QP's completions out of its CQs:
  // mlx5 does (__mlx5_cq_clean: polled or not, they are gone, and an SRQ receive's slot is free
  // again), so that no completion names a QP that no longer exists. rxe and siw leave them to
  // be polled (their kernel queues are not touched). libfabric's verbs provider counts on mlx5's
  // way: it closes an endpoint and then reads the CQ, taking what it finds for live requests.
  bool cq_cleaned_at_destroy_qp;
  // UD QPs (ibv_create_qp with IBV_QPT_UD): mlx5 and rxe have them; siw (iWARP) has none.
  bool ud_qps;
  // The `sl` of a UD receive's completion. On RoCE mlx5 reports the packet's type there (its
  // CQE's field: bit 3 a UDP header, bits 2:0 the L3 header, 2 = IPv4), which UCX reads to find
  // the destination address in the GRH: 0xa for RoCE v2 over IPv4. rxe reports 0.
  uint8_t ud_recv_sl;
  // ibv_query_port's port 1.
  PortProfile port;

  // Private data per rdma_cm message (rdma_connect, rdma_accept, rdma_reject).
  int max_connect_private_data;
  int max_accept_private_data;
  int max_reject_private_data;
};

// The three profiles, the default (mlx5) first.
absl::Span<const DeviceProfile> DeviceProfiles();

// The profile named `name`. Errors: InvalidArgument naming the known profiles.
absl::StatusOr<const DeviceProfile*> FindDeviceProfile(absl::string_view name);

// The active profile (mlx5 until SetActiveProfile says otherwise).
const DeviceProfile& ActiveProfile();

// Makes `profile` (one of DeviceProfiles()) the active one. Objects already created keep what
// they were created with (the context's ibv_device among them).
void SetActiveProfile(const DeviceProfile& profile);

// "IB" or "iWARP".
const char* TransportName(ibv_transport_type transport);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_PROFILES_DEVICE_PROFILE_H_
