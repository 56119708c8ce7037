// device.h: the simulated device (SimDevice, the one fake ibv_context of the process), its
// limits and capabilities, protection domains (SimPd) and memory regions (SimMr).
//
// Each Sim* struct embeds the verbs struct it stands for as its FIRST member (SimDevice: the
// verbs_context around its ibv_context, see below), so a pointer to the verbs struct is a
// pointer to the Sim* struct (to_sim() converts, as rxe's to_rqp() does:
// no virtual functions and no base classes, so the first member sits at offset 0; sim_test.cc
// checks it for every type).
//
// MR lookup: each PD owns its MR tables (by lkey and by rkey) under its own reader/writer lock,
// so lookups on different connections never contend on one lock, and lookups on the same PD
// share it as readers. A data-path operation holds the PD's reader lock while it copies, so an
// MR cannot be deregistered under a copy.

#ifndef SOFTRPMA_SIMVERBS_SIM_NIC_DEVICE_H_
#define SOFTRPMA_SIMVERBS_SIM_NIC_DEVICE_H_

#include <infiniband/verbs.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "simverbs/mutex.h"
#include "simverbs/sim/profiles/device_profile.h"
#include "simverbs/sim/signal_fd.h"

namespace softrpma::sim {

// ---- Device limits: those that differ between devices come from the active DeviceProfile
// (device_profile.h), as reported by IbvQueryDeviceEx and enforced at creation ----------------
// The size of the simulator's fixed per-WR arrays: no profile allows more SGEs.
inline constexpr int kMaxSge = kMaxSgeAnyDevice;
inline constexpr uint64_t kMaxMrSize = ~uint64_t{0};
inline constexpr char kDeviceName[] = "softrpma_sim0";

// The access flags ibv_reg_mr knows (the optional range, bits 20..29, is accepted and ignored).
inline constexpr int kKnownAccessFlags =
    IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
    IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_MW_BIND | IBV_ACCESS_ZERO_BASED | IBV_ACCESS_ON_DEMAND |
    IBV_ACCESS_HUGETLB | IBV_ACCESS_OPTIONAL_RANGE;

// Whether the device reports on-demand paging (default: the active profile's `odp`; a call
// overrides it for the rest of the process). Thread-safe.
void SetOdpSupported(bool supported);
bool OdpSupported();
// Whether the device reports native atomic write (kDeviceCapAtomicWrite in
// device_cap_flags_ex) and accepts IBV_QP_EX_WITH_ATOMIC_WRITE (default: the active profile's
// `native_atomic_write`, false on mlx5: librpma then uses the RDMA WRITE emulation; a call
// overrides it for the rest of the process). Thread-safe.
void SetAtomicWriteSupported(bool supported);
bool AtomicWriteSupported();
// Forgets both overrides: the active profile decides again (tests).
void ResetDeviceOverrides();
// The variable that sets it when the simulated NIC starts: "1" (native) or "0".
inline constexpr char kNativeAtomicWriteEnvVar[] = "RPMA_SIM_NATIVE_ATOMIC_WRITE";

// THIS PROCESS'S GID (the one entry of port 1's GID table): the IPv4-mapped RoCE v2 GID
// ::ffff:127.a.b.c, where a.b.c are the low 24 bits of getpid() (Linux pids are below 2^22), so
// every process of a machine has its own and a GID names the process a QP of ibv_modify_qp
// connects to. All of 127/8 is loopback: still a local address. Computed at each call: a child
// of fork() has its own.
void ProcessGid(uint8_t raw[16]);
// The GID of process `pid`, in the same form (rdma_cm's UD exchange builds a peer's address
// handle from the pid the kernel names).
void PidGid(int32_t pid, uint8_t raw[16]);
// Whether `raw` is a GID of this simulator's form (::ffff:127.x.y.z), and the pid it names.
bool GidPid(const uint8_t raw[16], int32_t* pid);

// The one simulated device. Created once by the backend and never destroyed. Its context points
// at the ibv_device of the profile active when it was made (the transport librpma reads).
//
// The context is inside a struct verbs_context, as every rdma-core provider's is (sz and
// abi_compat as verbs_init_context sets them), so that verbs.h's inline extended verbs
// (ibv_query_device_ex, ibv_query_port, ibv_create_cq_ex, ...) find the extended ops there: an
// op left NULL makes them take their legacy path or fail with EOPNOTSUPP / ENOSYS, as with a
// provider without the feature. The verbs_context is the FIRST member; its ibv_context is the
// verbs_context's LAST member, so an ibv_context* is NOT a SimDevice* (to_sim() converts).
struct SimDevice final {
  verbs_context verbs;  // FIRST member (see file comment)
  ibv_context& context = verbs.context;

  SimDevice();
  SimDevice(const SimDevice&) = delete;
  SimDevice& operator=(const SimDevice&) = delete;
  ~SimDevice();

  // Fills `attr` with the device's limits and capabilities (the active profile's).
  void Query(ibv_device_attr_ex* attr) const;

  // Counters that name objects deterministically (same program, same numbers).
  std::atomic<uint32_t> next_pd_handle{1};
  std::atomic<uint32_t> next_mr_index{1};
  std::atomic<uint32_t> next_cq_handle{1};
  std::atomic<uint32_t> next_srq_handle{1};
  std::atomic<uint32_t> next_qp_num{0x11};  // 0 and 1 are special QPs in InfiniBand
  std::atomic<uint32_t> next_comp_channel_number{1};

  // Asynchronous events (ibv_get_async_event(3)): queued in order behind context.async_fd,
  // which is readable while one is pending (an IBV_EVENT_CQ_ERR when a CQ overflows, cq.h).
  // Thread-safe; lock order: after SimCq's mutex (cq.h).
  void QueueAsyncEvent(const ibv_async_event& event);
  // Blocks until an event is queued (EAGAIN at once when async_fd is O_NONBLOCK, or the errno
  // of the eventfd if it could not be made), then takes the oldest.
  int GetAsyncEvent(ibv_async_event* event);
  // Drops the queued events about `cq` (it is being destroyed).
  void ForgetAsyncEvents(const ibv_cq* cq);

 private:
  softrpma::Mutex async_mu_;
  std::deque<ibv_async_event> async_events_ ABSL_GUARDED_BY(async_mu_);
  SignalFd async_signal_;
  int async_open_error_ = 0;
  // context.cmd_fd: a descriptor of the context's own, as the uverbs file a provider opens
  // (programs dup it, poll it, pass it to ibv_import_device); nothing is ever written to it.
  // Closed with the context.
  SignalFd cmd_file_;
};

// container_of: the ibv_context sits at the end of the verbs_context, which is at offset 0.
inline SimDevice* to_sim(ibv_context* context) {
  return reinterpret_cast<SimDevice*>(reinterpret_cast<char*>(context) -
                                      offsetof(verbs_context, context));
}

struct SimMr;

// A protection domain: owns the MR tables.
struct SimPd final {
  ibv_pd pd;  // FIRST member
  SimDevice* device;

  softrpma::SharedMutex mu;  // guards the tables; readers on the data path, writer on reg/dereg
  absl::flat_hash_map<uint32_t, SimMr*> mrs_by_lkey ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<uint32_t, SimMr*> mrs_by_rkey ABSL_GUARDED_BY(mu);
  // QPs and SRQs created on this PD (for EBUSY on dealloc).
  std::atomic<int> users{0};
  // Its number in the requester push (the region table's domain, its QPs' grants): never
  // another PD's of the process, also after this one is freed (PushDomain).
  const uint64_t push_domain;

  explicit SimPd(SimDevice* device);
  SimPd(const SimPd&) = delete;
  SimPd& operator=(const SimPd&) = delete;

  // The MR with that key whose range holds [addr, addr + length) and whose access flags
  // include all of `need_access` (0: only the range is checked), or nullptr.
  // REQUIRES: mu held (shared is enough).
  const SimMr* FindLocal(uint32_t lkey, uint64_t addr, uint64_t length, int need_access) const
      ABSL_SHARED_LOCKS_REQUIRED(mu);
  const SimMr* FindRemote(uint32_t rkey, uint64_t addr, uint64_t length, int need_access) const
      ABSL_SHARED_LOCKS_REQUIRED(mu);
};

inline SimPd* to_sim(ibv_pd* pd) { return reinterpret_cast<SimPd*>(pd); }

// The number a PD goes by in the requester push (its region table's domain, and its QPs'
// grants): never reused in the process, so a stale grant can never match a later PD's regions.
inline uint64_t PushDomain(const SimPd* pd) { return pd->push_domain; }
// The tag a push into the region of `rkey` names while it writes (host::FencePushesEverywhere).
inline uint64_t PushTag(uint32_t rkey) { return uint64_t{rkey} | (uint64_t{1} << 32); }

// A registered memory region.
struct SimMr final {
  ibv_mr mr;  // FIRST member
  SimPd* pd;
  int access;
  // In this process's region table (fabric/shm/region_table.h): its peers may push into it.
  bool published = false;

  SimMr() = default;
  SimMr(const SimMr&) = delete;
  SimMr& operator=(const SimMr&) = delete;

  // True when [addr, addr + length) lies inside the region (overflow-safe).
  bool Contains(uint64_t addr, uint64_t length) const;
};

inline SimMr* to_sim(ibv_mr* mr) { return reinterpret_cast<SimMr*>(mr); }

// Holds the reader locks of one or two PDs (the same PD once), taken in handle order so that
// two threads locking the same pair never deadlock against a waiting writer.
class PdReadLocks final {
 public:
  PdReadLocks(SimPd* a, SimPd* b);
  PdReadLocks(const PdReadLocks&) = delete;
  PdReadLocks& operator=(const PdReadLocks&) = delete;
  ~PdReadLocks();

 private:
  SimPd* first_;
  SimPd* second_;  // nullptr when both are the same PD (or b was nullptr)
};

// ---- The verbs calls of this module (see backend.h for each contract) -------------------
int AllocPd(SimDevice* device, ibv_pd** pd);
int DeallocPd(SimPd* pd);
int RegMr(SimPd* pd, void* addr, size_t length, int access, ibv_mr** mr);
int DeregMr(SimMr* mr);
int AdviseMr(SimPd* pd, ibv_advise_mr_advice advice, uint32_t flags, const ibv_sge* sg_list,
             uint32_t num_sge);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_NIC_DEVICE_H_
