#include "simverbs/sim/profiles/device_profile.h"

#include <atomic>
#include <cerrno>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace softrpma::sim {
namespace {

// Each value's source is in docs/DEVICES.md (same order).
constexpr DeviceProfile kProfiles[] = {
    {
        .name = "mlx5",
        .description = "NVIDIA/Mellanox ConnectX (InfiniBand or RoCE), the default",
        .transport = IBV_TRANSPORT_IB,
        .immediate_data = true,
        .vendor_id = 0x02c9,  // Mellanox; 4119 (0x1017): a ConnectX-5
        .vendor_part_id = 4119,
        .hw_ver = 0,
        .max_qp_wr = 1 << 14,
        .max_sge = 32,
        .max_sge_rd = 32,
        .max_cqe = (1 << 22) - 1,  // a ConnectX-4+'s log_max_cq_sz 22 (DEVICES.md)
        .max_inline_data = 256,
        .max_srq_wr = 1 << 14,
        .max_srq_sge = 32,
        .max_qp_rd_atom = 16,
        .max_qp_init_rd_atom = 16,
        .atomic_cap = IBV_ATOMIC_HCA,  // a ConnectX-5: host-endian 8-byte atomics (DEVICES.md)
        .native_atomic_write = false,
        .odp = true,
        .post_send_limit_errno = ENOMEM,  // _mlx5_post_send, set_data_inl_seg
        .wr_setter_limit_errno = ENOMEM,  // _mlx5_send_wr_set_sge_list, _inline_data
        .atomic_alignment_checked_at_post = false,
        .cq_rounding = QueueRounding::kPowerOfTwoMinusOne,
        .send_queue_rounding = QueueRounding::kPowerOfTwo,
        .recv_queue_rounding = QueueRounding::kPowerOfTwo,
        .inline_shares_sge_space = false,
        .slots_freed_at_poll = true,
        .cq_cleaned_at_destroy_qp = true,  // mlx5_destroy_qp, mlx5_modify_qp: __mlx5_cq_clean
        .ud_qps = true,
        .ud_recv_sl = 0xa,
        .port =
            {
                // mlx5_query_port_roce, a ConnectX-5 at 100 Gb/s (100GBASE-CR4: 4X EDR)
                .max_mtu = IBV_MTU_4096,
                .active_mtu = IBV_MTU_1024,
                .gid_tbl_len = 256,  // roce_address_table_size
                .pkey_tbl_len = 1,
                .port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS,
                .max_msg_sz = 1u << 30,  // 1 << log_max_msg
                .max_vl_num = 0,
                .active_width = 2,
                .active_speed = 32,
            },
        .max_connect_private_data = 56,
        .max_accept_private_data = 196,
        .max_reject_private_data = 148,
    },
    {
        .name = "rxe",
        .description = "Soft-RoCE, the kernel's rdma_rxe over Ethernet",
        .transport = IBV_TRANSPORT_IB,
        .immediate_data = true,
        .vendor_id = 0xffffff,  // rxe_param.h RXE_VENDOR_ID; part and hw_ver unset
        .vendor_part_id = 0,
        .hw_ver = 0,
        .max_qp_wr = 0x4000,
        .max_sge = 32,
        .max_sge_rd = 32,
        .max_cqe = (1 << 15) - 1,
        .max_inline_data = 400,
        .max_srq_wr = 0x4000,
        .max_srq_sge = 27,
        .max_qp_rd_atom = 128,
        .max_qp_init_rd_atom = 128,
        .atomic_cap = IBV_ATOMIC_HCA,
        .native_atomic_write = true,
        .odp = true,
        .post_send_limit_errno = EINVAL,  // rxe.c validate_send_wr
        .wr_setter_limit_errno = ENOSPC,  // wr_set_sge_list, wr_set_inline_data
        .atomic_alignment_checked_at_post = true,  // rxe.c validate_send_wr
        .cq_rounding = QueueRounding::kPowerOfTwoMinusOne,
        .send_queue_rounding = QueueRounding::kPowerOfTwoMinusOne,
        .recv_queue_rounding = QueueRounding::kPowerOfTwoMinusOne,
        .inline_shares_sge_space = true,
        .slots_freed_at_poll = false,
        .cq_cleaned_at_destroy_qp = false,
        .ud_qps = true,
        .ud_recv_sl = 0,
        .port =
            {
                // rxe_param.h enum rxe_port_param; rxe_query_port
                .max_mtu = IBV_MTU_4096,
                .active_mtu = IBV_MTU_1024,
                .gid_tbl_len = 1024,
                .pkey_tbl_len = 1,
                .port_cap_flags = IBV_PORT_CM_SUP,
                .max_msg_sz = 0x800000,
                .max_vl_num = 1,
                .active_width = 1,
                .active_speed = 1,
            },
        .max_connect_private_data = 56,
        .max_accept_private_data = 196,
        .max_reject_private_data = 148,
    },
    {
        .name = "siw",
        .description = "Soft-iWARP, the kernel's siw over TCP",
        .transport = IBV_TRANSPORT_IWARP,
        .immediate_data = false,
        .vendor_id = 0x626d74,  // siw.h SIW_VENDOR_ID ("bmt"); part 0, hw_ver unset
        .vendor_part_id = 0,
        .hw_ver = 0,
        .max_qp_wr = 1024 * 32,
        .max_sge = 6,
        .max_sge_rd = 1,
        .max_cqe = 1024 * 32 * 100,
        .max_inline_data = 80,
        .max_srq_wr = 1024 * 32 * 10,
        .max_srq_sge = 6,
        .max_qp_rd_atom = 128,
        .max_qp_init_rd_atom = 128,
        .atomic_cap = IBV_ATOMIC_NONE,
        .native_atomic_write = false,
        .odp = false,
        .post_send_limit_errno = EINVAL,  // siw.c push_send_wqe
        .wr_setter_limit_errno = EINVAL,  // libsiw has no ibv_wr_*: as its post
        .atomic_alignment_checked_at_post = false,  // (no atomics)
        .cq_rounding = QueueRounding::kPowerOfTwo,
        .send_queue_rounding = QueueRounding::kAsAsked,
        .recv_queue_rounding = QueueRounding::kAsAsked,
        .inline_shares_sge_space = false,
        .slots_freed_at_poll = false,
        .cq_cleaned_at_destroy_qp = false,
        .ud_qps = false,
        .ud_recv_sl = 0,
        .port =
            {
                // siw_query_port: both MTUs the netdev's, no pkey table
                .max_mtu = IBV_MTU_1024,
                .active_mtu = IBV_MTU_1024,
                .gid_tbl_len = 1,
                .pkey_tbl_len = 0,
                .port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_DEVICE_MGMT_SUP,
                .max_msg_sz = 0xffffffffu,  // -1
                .max_vl_num = 0,
                .active_width = 1,
                .active_speed = 1,
            },
        .max_connect_private_data = kMaxPrivateDataAnyDevice,
        .max_accept_private_data = kMaxPrivateDataAnyDevice,
        .max_reject_private_data = kMaxPrivateDataAnyDevice,
    },
};

constexpr bool WithinArrays(const DeviceProfile& p) {
  return p.max_sge <= kMaxSgeAnyDevice && p.max_srq_sge <= kMaxSgeAnyDevice &&
         p.max_connect_private_data <= kMaxPrivateDataAnyDevice &&
         p.max_accept_private_data <= kMaxPrivateDataAnyDevice &&
         p.max_reject_private_data <= kMaxPrivateDataAnyDevice;
}
static_assert(WithinArrays(kProfiles[0]) && WithinArrays(kProfiles[1]) &&
                  WithinArrays(kProfiles[2]),
              "a profile exceeds the simulator's fixed arrays");

std::atomic<const DeviceProfile*> g_active{&kProfiles[0]};

uint32_t NextPowerOfTwo(uint32_t n) {
  uint32_t p = 1;
  while (p < n && p != 0x80000000u) p <<= 1;
  return p < n ? n : p;
}

}  // namespace

uint32_t RoundQueueSize(QueueRounding rounding, uint32_t n) {
  if (n == 0) return 0;
  switch (rounding) {
    case QueueRounding::kAsAsked:
      return n;
    case QueueRounding::kPowerOfTwo:
      return NextPowerOfTwo(n);
    case QueueRounding::kPowerOfTwoMinusOne:
      return n == UINT32_MAX ? n : NextPowerOfTwo(n + 1) - 1;
  }
  return n;
}

absl::Span<const DeviceProfile> DeviceProfiles() { return kProfiles; }

absl::StatusOr<const DeviceProfile*> FindDeviceProfile(absl::string_view name) {
  std::string names;
  for (const DeviceProfile& profile : kProfiles) {
    if (name == profile.name) return &profile;
    absl::StrAppend(&names, names.empty() ? "" : ", ", profile.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown device \"", name, "\": expected one of ", names));
}

const DeviceProfile& ActiveProfile() { return *g_active.load(std::memory_order_acquire); }

void SetActiveProfile(const DeviceProfile& profile) {
  g_active.store(&profile, std::memory_order_release);
}

const char* TransportName(ibv_transport_type transport) {
  return transport == IBV_TRANSPORT_IWARP ? "iWARP" : "IB";
}

}  // namespace softrpma::sim
