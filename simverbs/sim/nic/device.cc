#include "simverbs/sim/nic/device.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "simverbs/alloc.h"
#include "simverbs/backend.h"
#include "simverbs/sim/fabric/host.h"
#include "simverbs/sim/fabric/shm/region_table.h"
#include "simverbs/sim/sched/sched.h"
#include "simverbs/sim/waits.h"

namespace softrpma::sim {

void ProcessGid(uint8_t raw[16]) { PidGid(getpid(), raw); }

void PidGid(int32_t pid_value, uint8_t raw[16]) {
  std::memset(raw, 0, 16);
  raw[10] = 0xff;
  raw[11] = 0xff;
  const auto pid = static_cast<uint32_t>(pid_value);
  raw[12] = 127;
  raw[13] = static_cast<uint8_t>(pid >> 16);
  raw[14] = static_cast<uint8_t>(pid >> 8);
  raw[15] = static_cast<uint8_t>(pid);
}

bool GidPid(const uint8_t raw[16], int32_t* pid) {
  for (int i = 0; i < 10; ++i) {
    if (raw[i] != 0) return false;
  }
  if (raw[10] != 0xff || raw[11] != 0xff || raw[12] != 127) return false;
  *pid = (int32_t{raw[13]} << 16) | (int32_t{raw[14]} << 8) | raw[15];
  return true;
}

namespace {

// -1: no override, the active profile decides; else 0 or 1.
std::atomic<int> g_odp_override{-1};
std::atomic<int> g_atomic_write_override{-1};

bool Decide(const std::atomic<int>& override_value, bool profile_value) {
  const int value = override_value.load(std::memory_order_relaxed);
  return value < 0 ? profile_value : value != 0;
}

// The static ibv_device of one profile (iWARP devices are RNICs, as siw's is).
ibv_device MakeDevice(const DeviceProfile& profile) {
  ibv_device device;
  std::memset(&device, 0, sizeof(device));
  device.transport_type = profile.transport;
  device.node_type = profile.transport == IBV_TRANSPORT_IWARP ? IBV_NODE_RNIC : IBV_NODE_CA;
  std::strncpy(device.name, kDeviceName, sizeof(device.name) - 1);
  std::strncpy(device.dev_name, "uverbs_softrpma0", sizeof(device.dev_name) - 1);
  std::strncpy(device.dev_path, "/sys/class/infiniband_verbs/uverbs_softrpma0",
               sizeof(device.dev_path) - 1);
  std::strncpy(device.ibdev_path, "/sys/class/infiniband/softrpma_sim0",
               sizeof(device.ibdev_path) - 1);
  return device;
}

// The ibv_device of the active profile: one per profile, made on first use, never freed.
ibv_device* StaticDevice() {
  static ibv_device* devices = [] {
    const absl::Span<const DeviceProfile> profiles = DeviceProfiles();
    ibv_device* made = new ibv_device[profiles.size()];
    for (size_t i = 0; i < profiles.size(); ++i) made[i] = MakeDevice(profiles[i]);
    return made;
  }();
  return &devices[&ActiveProfile() - DeviceProfiles().data()];
}

// A permutation of the 32-bit values keyed by `key`: four Feistel rounds over 16-bit halves
// (bijective whatever the round function), the round function a Mix64 of the key.
uint32_t PermuteKey(uint64_t key, uint32_t x) {
  uint32_t left = x >> 16;
  uint32_t right = x & 0xffff;
  for (uint64_t round = 0; round < 4; ++round) {
    const uint32_t f = static_cast<uint32_t>(Mix64(key, (round << 16) | right)) & 0xffff;
    const uint32_t next = left ^ f;
    left = right;
    right = next;
  }
  return (left << 16) | right;
}

// The lkey and rkey of the MR of `index` under the current seed: the seeded permutation of
// 2 * index and 2 * index + 1. So a key is unique among every MR of the device (for the first
// 2^31 of them) whether it is an lkey or an rkey (mixing them up is caught), the same program
// with the same seed gets the same keys (sched.h), and a key nobody was handed is not found
// from the index or from the keys of other MRs, as index << 8 | 0x0B was at the first guess
// (issue 18). False when either key would be 0, which verbs programs take for "no key": the
// caller takes the next index.
bool MrKeys(uint32_t index, uint32_t* lkey, uint32_t* rkey) {
  const uint64_t key = DeriveSeed(CurrentSeed(), SeedStream::kMrKeys);
  *lkey = PermuteKey(key, index << 1);
  *rkey = PermuteKey(key, (index << 1) | 1);
  return *lkey != 0 && *rkey != 0;
}

}  // namespace

void SetOdpSupported(bool supported) {
  g_odp_override.store(supported ? 1 : 0, std::memory_order_relaxed);
}

bool OdpSupported() { return Decide(g_odp_override, ActiveProfile().odp); }

void SetAtomicWriteSupported(bool supported) {
  g_atomic_write_override.store(supported ? 1 : 0, std::memory_order_relaxed);
}

bool AtomicWriteSupported() {
  return Decide(g_atomic_write_override, ActiveProfile().native_atomic_write);
}

void ResetDeviceOverrides() {
  g_odp_override.store(-1, std::memory_order_relaxed);
  g_atomic_write_override.store(-1, std::memory_order_relaxed);
}

SimDevice::SimDevice() {
  std::memset(&verbs, 0, sizeof(verbs));
  verbs.sz = sizeof(verbs);  // as rdma-core's verbs_init_context
  context.abi_compat = __VERBS_ABI_IS_EXTENDED;
  context.device = StaticDevice();
  context.cmd_fd = cmd_file_.Open() == 0 ? cmd_file_.fd() : -1;
  async_open_error_ = async_signal_.Open();
  context.async_fd = async_signal_.fd();
  context.num_comp_vectors = 1;
  pthread_mutex_init(&context.mutex, nullptr);
}

void SimDevice::QueueAsyncEvent(const ibv_async_event& event) {
  softrpma::MutexLock lock(&async_mu_);
  async_events_.push_back(event);
  if (async_events_.size() == 1) {
    async_signal_.Raise();
  } else {
    async_signal_.Wake();
  }
}

int SimDevice::GetAsyncEvent(ibv_async_event* event) {
  if (async_open_error_ != 0) return async_open_error_;
  softrpma::MutexLock lock(&async_mu_);
  while (async_events_.empty()) {
    waits::ScopedWait wait("ibv_get_async_event", "the device's asynchronous events");
    if (const int err = async_signal_.Wait(&async_mu_); err != 0) return err;
  }
  *event = async_events_.front();
  async_events_.pop_front();
  if (async_events_.empty()) {
    async_signal_.Lower();
  } else {
    async_signal_.Raise();  // (after a Wait took the counter) for the next reader
  }
  return 0;
}

void SimDevice::ForgetAsyncEvents(const ibv_cq* cq) {
  softrpma::MutexLock lock(&async_mu_);
  const bool had_events = !async_events_.empty();
  async_events_.erase(std::remove_if(async_events_.begin(), async_events_.end(),
                                     [cq](const ibv_async_event& e) {
                                       return e.event_type == IBV_EVENT_CQ_ERR &&
                                              e.element.cq == cq;
                                     }),
                      async_events_.end());
  if (had_events && async_events_.empty()) async_signal_.Lower();
}

SimDevice::~SimDevice() { pthread_mutex_destroy(&context.mutex); }

void SimDevice::Query(ibv_device_attr_ex* attr) const {
  const DeviceProfile& profile = ActiveProfile();
  std::memset(attr, 0, sizeof(*attr));
  ibv_device_attr& a = attr->orig_attr;
  std::strncpy(a.fw_ver, "softrpma-sim 1.0", sizeof(a.fw_ver) - 1);
  a.node_guid = 0x0100000000000000ULL;  // big-endian 1: any fixed value will do
  a.sys_image_guid = a.node_guid;
  a.max_mr_size = kMaxMrSize;
  a.page_size_cap = 4096;
  a.vendor_id = profile.vendor_id;
  a.vendor_part_id = profile.vendor_part_id;
  a.hw_ver = profile.hw_ver;
  a.max_qp = 1 << 16;
  a.max_qp_wr = profile.max_qp_wr;
  a.device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE;
  a.max_sge = profile.max_sge;
  a.max_sge_rd = profile.max_sge_rd;
  a.max_cq = 1 << 16;
  a.max_cqe = profile.max_cqe;
  a.max_mr = 1 << 20;
  a.max_pd = 1 << 16;
  a.max_qp_rd_atom = profile.max_qp_rd_atom;
  a.max_res_rd_atom = profile.max_qp_rd_atom << 16;
  a.max_qp_init_rd_atom = profile.max_qp_init_rd_atom;
  a.atomic_cap = profile.atomic_cap;
  a.max_srq = 1 << 16;
  a.max_srq_wr = profile.max_srq_wr;
  a.max_srq_sge = profile.max_srq_sge;
  a.max_pkeys = 1;
  a.local_ca_ack_delay = 15;
  a.phys_port_cnt = 1;
  attr->phys_port_cnt_ex = 1;
  if (AtomicWriteSupported()) attr->device_cap_flags_ex |= kDeviceCapAtomicWrite;
  if (OdpSupported()) {
    attr->odp_caps.general_caps = IBV_ODP_SUPPORT;
    attr->odp_caps.per_transport_caps.rc_odp_caps = IBV_ODP_SUPPORT_SEND | IBV_ODP_SUPPORT_RECV |
                                                    IBV_ODP_SUPPORT_WRITE | IBV_ODP_SUPPORT_READ |
                                                    IBV_ODP_SUPPORT_SRQ_RECV;
  }
}

namespace {
std::atomic<uint64_t> g_next_push_domain{1};
}  // namespace

SimPd::SimPd(SimDevice* dev)
    : device(dev), push_domain(g_next_push_domain.fetch_add(1, std::memory_order_relaxed)) {
  std::memset(&pd, 0, sizeof(pd));
  pd.context = &dev->context;
  pd.handle = dev->next_pd_handle.fetch_add(1, std::memory_order_relaxed);
}

const SimMr* SimPd::FindLocal(uint32_t lkey, uint64_t addr, uint64_t length,
                              int need_access) const {
  auto it = mrs_by_lkey.find(lkey);
  if (it == mrs_by_lkey.end()) return nullptr;
  const SimMr* mr = it->second;
  if ((mr->access & need_access) != need_access || !mr->Contains(addr, length)) return nullptr;
  return mr;
}

const SimMr* SimPd::FindRemote(uint32_t rkey, uint64_t addr, uint64_t length,
                               int need_access) const {
  auto it = mrs_by_rkey.find(rkey);
  if (it == mrs_by_rkey.end()) return nullptr;
  const SimMr* mr = it->second;
  if ((mr->access & need_access) != need_access || !mr->Contains(addr, length)) return nullptr;
  return mr;
}

bool SimMr::Contains(uint64_t addr, uint64_t length) const {
  const uint64_t begin = reinterpret_cast<uintptr_t>(mr.addr);
  const uint64_t size = mr.length;
  return addr >= begin && length <= size && addr - begin <= size - length;
}

PdReadLocks::PdReadLocks(SimPd* a, SimPd* b) : first_(a), second_(b) {
  if (first_ == nullptr) std::swap(first_, second_);
  if (second_ == first_) second_ = nullptr;
  if (second_ != nullptr && second_->pd.handle < first_->pd.handle) std::swap(first_, second_);
  if (first_ != nullptr) first_->mu.ReaderLock();
  if (second_ != nullptr) second_->mu.ReaderLock();
}

PdReadLocks::~PdReadLocks() {
  if (second_ != nullptr) second_->mu.ReaderUnlock();
  if (first_ != nullptr) first_->mu.ReaderUnlock();
}

int AllocPd(SimDevice* device, ibv_pd** pd) {
  SimPd* sim_pd = New<SimPd>(device);
  if (sim_pd == nullptr) return ENOMEM;
  *pd = &sim_pd->pd;
  return 0;
}

int DeallocPd(SimPd* pd) {
  {
    softrpma::WriterMutexLock lock(&pd->mu);
    if (!pd->mrs_by_lkey.empty() || pd->users.load(std::memory_order_acquire) != 0) return EBUSY;
  }
  Delete(pd);
  return 0;
}

int RegMr(SimPd* pd, void* addr, size_t length, int access, ibv_mr** mr) {
  if (length == 0 || addr == nullptr) return EINVAL;
  if ((access & ~kKnownAccessFlags) != 0) return EINVAL;
  // Remote write and remote atomic need local write (as on hardware).
  if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) != 0 &&
      (access & IBV_ACCESS_LOCAL_WRITE) == 0) {
    return EINVAL;
  }
  if ((access & IBV_ACCESS_ON_DEMAND) != 0 && !OdpSupported()) return EINVAL;
  const uint64_t begin = reinterpret_cast<uintptr_t>(addr);
  if (length > ~uint64_t{0} - begin) return EINVAL;
  SimMr* sim_mr = New<SimMr>();
  if (sim_mr == nullptr) return ENOMEM;
  uint32_t index = 0;
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  do {
    index = pd->device->next_mr_index.fetch_add(1, std::memory_order_relaxed);
  } while (!MrKeys(index, &lkey, &rkey));
  std::memset(&sim_mr->mr, 0, sizeof(sim_mr->mr));
  sim_mr->mr.context = pd->pd.context;
  sim_mr->mr.pd = &pd->pd;
  sim_mr->mr.addr = addr;
  sim_mr->mr.length = length;
  sim_mr->mr.handle = index;
  sim_mr->mr.lkey = lkey;
  sim_mr->mr.rkey = rkey;
  sim_mr->pd = pd;
  sim_mr->access = access;
  {
    softrpma::WriterMutexLock lock(&pd->mu);
    pd->mrs_by_lkey[sim_mr->mr.lkey] = sim_mr;
    pd->mrs_by_rkey[sim_mr->mr.rkey] = sim_mr;
  }
  // Remotely writable: published for the requester push (nic/carrier_host.cc). A region that
  // finds no room there is written the ordinary way.
  if ((access & IBV_ACCESS_REMOTE_WRITE) != 0) {
    if (shm::RegionTable* table = shm::RegionTable::Mine(); table != nullptr) {
      sim_mr->published = table->Publish(shm::RegionTable::Region{rkey, PushDomain(pd), begin, length});
    }
  }
  *mr = &sim_mr->mr;
  return 0;
}

int DeregMr(SimMr* mr) {
  SimPd* pd = mr->pd;
  {
    softrpma::WriterMutexLock lock(&pd->mu);
    auto it = pd->mrs_by_lkey.find(mr->mr.lkey);
    if (it == pd->mrs_by_lkey.end() || it->second != mr) return EINVAL;
    pd->mrs_by_lkey.erase(it);
    pd->mrs_by_rkey.erase(mr->mr.rkey);
  }
  if (mr->published) {
    // No push starts into it from here, and none still writing into it is left behind when
    // this returns (the memory may be freed next).
    if (shm::RegionTable* table = shm::RegionTable::Mine(); table != nullptr) {
      table->Withdraw(mr->mr.rkey, PushDomain(pd));
    }
    host::FencePushesEverywhere(PushTag(mr->mr.rkey));
  }
  Delete(mr);
  return 0;
}

int AdviseMr(SimPd* pd, ibv_advise_mr_advice advice, uint32_t flags, const ibv_sge* sg_list,
             uint32_t num_sge) {
  if (!OdpSupported()) return EOPNOTSUPP;
  if (advice != IBV_ADVISE_MR_ADVICE_PREFETCH && advice != IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE &&
      advice != IBV_ADVISE_MR_ADVICE_PREFETCH_NO_FAULT) {
    return EINVAL;
  }
  if ((flags & ~static_cast<uint32_t>(IBV_ADVISE_MR_FLAG_FLUSH)) != 0) return EINVAL;
  if (num_sge == 0 || sg_list == nullptr) return EINVAL;
  const int need = advice == IBV_ADVISE_MR_ADVICE_PREFETCH_WRITE ? IBV_ACCESS_LOCAL_WRITE : 0;
  softrpma::ReaderMutexLock lock(&pd->mu);
  for (uint32_t i = 0; i < num_sge; ++i) {
    if (pd->FindLocal(sg_list[i].lkey, sg_list[i].addr, sg_list[i].length, need) == nullptr) {
      return EFAULT;
    }
  }
  return 0;  // Prefetching is a no-op: simulated memory is always present.
}

}  // namespace softrpma::sim
