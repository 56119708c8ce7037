// The device profile table: names, lookup, the facts each profile must keep (docs/DEVICES.md),
// and queue rounding.

#include "simverbs/sim/profiles/device_profile.h"

#include <string>

#include "gtest/gtest.h"

namespace softrpma::sim {
namespace {

TEST(DeviceProfilesTest, Table_Mlx5FirstThenRxeAndSiw) {
  ASSERT_EQ(DeviceProfiles().size(), 3u);
  EXPECT_STREQ(DeviceProfiles()[0].name, "mlx5");
  EXPECT_STREQ(DeviceProfiles()[1].name, "rxe");
  EXPECT_STREQ(DeviceProfiles()[2].name, "siw");
  EXPECT_EQ(&ActiveProfile(), &DeviceProfiles()[0]);
}

TEST(DeviceProfilesTest, FindDeviceProfile_KnownName_ReturnsIt) {
  for (const DeviceProfile& profile : DeviceProfiles()) {
    absl::StatusOr<const DeviceProfile*> found = FindDeviceProfile(profile.name);
    ASSERT_TRUE(found.ok()) << profile.name;
    EXPECT_EQ(*found, &profile);
  }
}

TEST(DeviceProfilesTest, FindDeviceProfile_UnknownName_InvalidArgumentNamingTheKnownOnes) {
  for (const char* name : {"", "MLX5", "mlx4", "siw "}) {
    absl::StatusOr<const DeviceProfile*> found = FindDeviceProfile(name);
    ASSERT_FALSE(found.ok()) << name;
    EXPECT_EQ(found.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(std::string(found.status().message()),
              "unknown device \"" + std::string(name) + "\": expected one of mlx5, rxe, siw");
  }
}

TEST(DeviceProfilesTest, Transport_IbOnMlx5AndRxe_IwarpOnSiw) {
  EXPECT_EQ((*FindDeviceProfile("mlx5"))->transport, IBV_TRANSPORT_IB);
  EXPECT_EQ((*FindDeviceProfile("rxe"))->transport, IBV_TRANSPORT_IB);
  EXPECT_EQ((*FindDeviceProfile("siw"))->transport, IBV_TRANSPORT_IWARP);
  EXPECT_STREQ(TransportName(IBV_TRANSPORT_IWARP), "iWARP");
  EXPECT_STREQ(TransportName(IBV_TRANSPORT_IB), "IB");
}

TEST(DeviceProfilesTest, Facts_AsTheDriversHaveThem) {
  const DeviceProfile& mlx5 = **FindDeviceProfile("mlx5");
  const DeviceProfile& rxe = **FindDeviceProfile("rxe");
  const DeviceProfile& siw = **FindDeviceProfile("siw");
  // Immediate data: siw's provider rejects both *_WITH_IMM opcodes.
  EXPECT_TRUE(mlx5.immediate_data);
  EXPECT_TRUE(rxe.immediate_data);
  EXPECT_FALSE(siw.immediate_data);
  // Native atomic write: rxe reports IB_DEVICE_ATOMIC_WRITE; mlx5 and siw do not.
  EXPECT_FALSE(mlx5.native_atomic_write);
  EXPECT_TRUE(rxe.native_atomic_write);
  EXPECT_FALSE(siw.native_atomic_write);
  // ODP: mlx5 and rxe (CONFIG_INFINIBAND_ON_DEMAND_PAGING), not siw.
  EXPECT_TRUE(mlx5.odp);
  EXPECT_TRUE(rxe.odp);
  EXPECT_FALSE(siw.odp);
  // siw: SIW_MAX_SGE 6, SIW_MAX_INLINE = 16 * (6 - 1), no atomics, SIW_MAX_SGE_RD 1.
  EXPECT_EQ(siw.max_sge, 6);
  EXPECT_EQ(siw.max_inline_data, 80);
  EXPECT_EQ(siw.max_sge_rd, 1);
  EXPECT_EQ(siw.atomic_cap, IBV_ATOMIC_NONE);
  // mlx5: (1 << log_max_cq_sz) - 1, log_max_cq_sz 22 on a ConnectX-4 and later; 8-byte
  // atomics with host-endian responses (get_atomic_caps: IB_ATOMIC_HCA).
  EXPECT_EQ(mlx5.max_cqe, 4194303);
  EXPECT_EQ(mlx5.atomic_cap, IBV_ATOMIC_HCA);
  // rxe: (1 << RXE_MAX_LOG_CQE) - 1, RXE_ATOMIC_CAP = IB_ATOMIC_HCA.
  EXPECT_EQ(rxe.max_cqe, 32767);
  EXPECT_EQ(rxe.atomic_cap, IBV_ATOMIC_HCA);
  // Private data: the IB CM's REQ (92 - the 36-byte rdma_cm header), REP, REJ; iWARP's MPA
  // allows 256, of which rdma_conn_param's uint8_t length can say 255.
  for (const DeviceProfile* ib : {&mlx5, &rxe}) {
    EXPECT_EQ(ib->max_connect_private_data, 56);
    EXPECT_EQ(ib->max_accept_private_data, 196);
    EXPECT_EQ(ib->max_reject_private_data, 148);
  }
  EXPECT_EQ(siw.max_connect_private_data, 255);
  EXPECT_EQ(siw.max_accept_private_data, 255);
  EXPECT_EQ(siw.max_reject_private_data, 255);
}

TEST(DeviceProfilesTest, Port_AsEachDriversQueryPort) {
  const PortProfile& mlx5 = (*FindDeviceProfile("mlx5"))->port;
  const PortProfile& rxe = (*FindDeviceProfile("rxe"))->port;
  const PortProfile& siw = (*FindDeviceProfile("siw"))->port;
  // mlx5_query_port_roce on a ConnectX-5 at 100 Gb/s: 4X EDR, IP-based GIDs.
  EXPECT_EQ(mlx5.max_mtu, IBV_MTU_4096);
  EXPECT_EQ(mlx5.gid_tbl_len, 256);
  EXPECT_EQ(mlx5.pkey_tbl_len, 1);
  EXPECT_EQ(mlx5.port_cap_flags, 0x04010000u);
  EXPECT_EQ(mlx5.max_msg_sz, 0x40000000u);
  EXPECT_EQ(mlx5.active_width, 2);
  EXPECT_EQ(mlx5.active_speed, 32);
  // rxe_param.h's enum rxe_port_param.
  EXPECT_EQ(rxe.max_mtu, IBV_MTU_4096);
  EXPECT_EQ(rxe.gid_tbl_len, 1024);
  EXPECT_EQ(rxe.pkey_tbl_len, 1);
  EXPECT_EQ(rxe.port_cap_flags, 0x00010000u);
  EXPECT_EQ(rxe.max_msg_sz, 0x800000u);
  EXPECT_EQ(rxe.max_vl_num, 1);
  // siw_query_port: the netdev's MTU for both, one GID, no pkey table, max_msg_sz -1.
  EXPECT_EQ(siw.max_mtu, IBV_MTU_1024);
  EXPECT_EQ(siw.gid_tbl_len, 1);
  EXPECT_EQ(siw.pkey_tbl_len, 0);
  EXPECT_EQ(siw.port_cap_flags, 0x00090000u);
  EXPECT_EQ(siw.max_msg_sz, 0xffffffffu);
  for (const DeviceProfile& profile : DeviceProfiles()) {
    EXPECT_EQ(profile.port.active_mtu, IBV_MTU_1024) << profile.name;  // a 1500-byte netdev
    EXPECT_GE(profile.port.gid_tbl_len, 1) << profile.name;  // GID 0 is the process's
  }
}

TEST(DeviceProfilesTest, Limits_WithinTheSimulatorsArrays) {
  for (const DeviceProfile& profile : DeviceProfiles()) {
    EXPECT_LE(profile.max_sge, kMaxSgeAnyDevice) << profile.name;
    EXPECT_LE(profile.max_srq_sge, kMaxSgeAnyDevice) << profile.name;
    EXPECT_GT(profile.max_qp_wr, 0) << profile.name;
    EXPECT_GT(profile.max_cqe, 0) << profile.name;
    EXPECT_NE(std::string(profile.description), "") << profile.name;
  }
}

TEST(RoundQueueSizeTest, EachRounding) {
  struct Case {
    QueueRounding rounding;
    uint32_t asked;
    uint32_t reported;
  };
  const Case cases[] = {
      {QueueRounding::kAsAsked, 10, 10},
      {QueueRounding::kAsAsked, 0, 0},
      {QueueRounding::kPowerOfTwo, 1, 1},
      {QueueRounding::kPowerOfTwo, 10, 16},
      {QueueRounding::kPowerOfTwo, 16, 16},
      {QueueRounding::kPowerOfTwo, 0, 0},
      {QueueRounding::kPowerOfTwoMinusOne, 1, 1},
      {QueueRounding::kPowerOfTwoMinusOne, 10, 15},
      {QueueRounding::kPowerOfTwoMinusOne, 15, 15},
      {QueueRounding::kPowerOfTwoMinusOne, 16, 31},
      {QueueRounding::kPowerOfTwoMinusOne, 0, 0},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(RoundQueueSize(c.rounding, c.asked), c.reported)
        << static_cast<int>(c.rounding) << " " << c.asked;
  }
}

TEST(ActiveProfileTest, SetActiveProfile_ChangesIt) {
  const DeviceProfile& siw = **FindDeviceProfile("siw");
  SetActiveProfile(siw);
  EXPECT_EQ(&ActiveProfile(), &siw);
  SetActiveProfile(DeviceProfiles()[0]);
  EXPECT_EQ(&ActiveProfile(), &DeviceProfiles()[0]);
}

}  // namespace
}  // namespace softrpma::sim
