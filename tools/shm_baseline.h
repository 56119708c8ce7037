// shm_baseline.h: libfabric's shm provider between two processes of this machine, measured by
// the bench binary itself in the same run as the simulated NIC's figures it is the baseline of
// (RMA writes, which fi_pingpong does not do).
//
// The bench forks a peer; the two open shm endpoints (FI_EP_RDM, FI_RMA), exchange their
// addresses and memory keys over pipes, and run:
//   * an 8-byte write ping-pong: each side writes a counter into the other's memory and spins
//     on its own until the answer lands (half a round trip, like ib_write_lat);
//   * 64-byte writes, 16 in flight, each with its completion (writes per second);
//   * 1 MiB writes, 16 in flight (bandwidth);
//   * 8-byte writes one at a time, each waited for until its completion, asked for with
//     FI_DELIVERY_COMPLETE, says its data is in the target's memory.
// shm moves RMA through the target's progress: the target polls its CQ meanwhile, as a
// simulated NIC's target has its fabric thread do it.

#ifndef SOFTRPMA_TOOLS_SHM_BASELINE_H_
#define SOFTRPMA_TOOLS_SHM_BASELINE_H_

#include <string>

namespace softrpma::bench {

struct ShmRmaFigures {
  std::string error;  // empty when every figure was measured
  double write_pingpong_us = 0;  // half a round trip
  double small_writes_mops = 0;  // 64 B writes per microsecond (millions per second)
  double big_write_gbs = 0;      // 1 MiB writes
  double delivered_write_us = 0;  // an 8 B delivery-complete write and its completion
  std::string delivered_error;    // why delivered_write_us is 0, when the others were measured
};

ShmRmaFigures MeasureShmRma(int pingpong_rounds, int small_writes, int big_writes,
                            int delivered_writes);

}  // namespace softrpma::bench

#endif  // SOFTRPMA_TOOLS_SHM_BASELINE_H_
