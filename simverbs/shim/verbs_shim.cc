// verbs_shim.cc: libibverbs.so.1 of the verbs shim (see shim.h for the model and the list of
// what works and what fails).

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <infiniband/sa.h>
#include <infiniband/verbs.h>
#include <rdma/ib_user_sa.h>
#include <rdma/ib_user_verbs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "simverbs/backend.h"
#include "simverbs/mutex.h"
#include "simverbs/shim/shim.h"
#include "simverbs/sim/profiles/device_profile.h"
#include "simverbs/sim/sim_backend.h"

// Declared by rdma-core's private headers (driver.h, marshall.h), which Debian does not install.
extern "C" {
enum ibv_gid_type_sysfs {
  IBV_GID_TYPE_SYSFS_IB_ROCE_V1,
  IBV_GID_TYPE_SYSFS_ROCE_V2,
};
int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                       ibv_gid_type_sysfs* type);
const char* ibv_get_sysfs_path(void);
int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size);
void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src);
void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src);
void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src);
void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src);
}

namespace softrpma::shim {
namespace {

// The verbs conventions, from the Backend's one (backend.h).
int ToErrno(int err) { return err == kNoErrno ? EIO : err; }
template <typename T>
T* NullWithErrno(int err) {
  errno = ToErrno(err);
  return nullptr;
}

Backend* TheBackend() {
  absl::StatusOr<Backend*> backend = sim::GetSimBackend();
  if (!backend.ok()) {
    errno = EINVAL;  // the simulator said why on stderr
    return nullptr;
  }
  return *backend;
}

void InstallExtendedOps(ibv_context* context);

ibv_context* TheContext() {
  absl::StatusOr<ibv_context*> context = sim::GetSimContext();
  if (!context.ok()) {
    errno = EINVAL;
    return nullptr;
  }
  // Once per context, before it is first handed out: a fork child gets a context of its own
  // (sim_backend.cc, ForgetBackendInChild), which needs the ops too.
  static std::atomic<ibv_context*> installed{nullptr};
  if (installed.load(std::memory_order_acquire) != *context) {
    static softrpma::Mutex mu;
    softrpma::MutexLock lock(&mu);
    if (installed.load(std::memory_order_relaxed) != *context) {
      InstallExtendedOps(*context);
      installed.store(*context, std::memory_order_release);
    }
  }
  return *context;
}

bool IsTheContext(ibv_context* context) {
  return context != nullptr && context == TheContext();
}

bool IsTheDevice(ibv_device* device) {
  ibv_context* context = TheContext();
  return device != nullptr && context != nullptr && device == context->device;
}

// ---- The port: the active profile's values (sim::PortProfile; docs/DEVICES.md), the state
// ACTIVE as a port whose netdev is up, LID 0 as on any Ethernet port. Of its tables only the
// first entries hold something: GID 0 (this process's) and, where the profile has a pkey
// table, the default pkey; the other entries of the GID table are empty. -----------------------
constexpr uint8_t kPortNum = 1;
constexpr uint8_t kPhysStateLinkUp = 5;    // IB_PORT_PHYS_STATE_LINK_UP (IBA 14.2.5.6)
constexpr uint16_t kDefaultPkey = 0xffff;  // the default partition, full member (IBA 10.9.1.2)

const sim::PortProfile& Port() { return sim::ActiveProfile().port; }

void FillPort(ibv_port_attr* attr) {
  const sim::PortProfile& port = Port();
  std::memset(attr, 0, sizeof(*attr));
  attr->state = IBV_PORT_ACTIVE;
  attr->max_mtu = port.max_mtu;
  attr->active_mtu = port.active_mtu;
  attr->gid_tbl_len = port.gid_tbl_len;
  attr->port_cap_flags = port.port_cap_flags;
  attr->max_msg_sz = port.max_msg_sz;
  attr->pkey_tbl_len = port.pkey_tbl_len;
  attr->lid = 0;
  attr->sm_lid = 0;
  attr->lmc = 0;
  attr->max_vl_num = port.max_vl_num;
  attr->sm_sl = 0;
  attr->subnet_timeout = 0;
  attr->init_type_reply = 0;
  attr->active_width = port.active_width;
  attr->active_speed = port.active_speed;
  attr->phys_state = kPhysStateLinkUp;
  attr->link_layer = IBV_LINK_LAYER_ETHERNET;
}

// Whether `index` is an entry of the port's GID table (entry 0 holds the GID, the rest are
// empty) or of its pkey table.
bool InGidTable(int64_t index) { return index >= 0 && index < Port().gid_tbl_len; }
bool InPkeyTable(int64_t index) { return index >= 0 && index < Port().pkey_tbl_len; }

// The one GID: this process's ::ffff:127.a.b.c (a.b.c from the pid; sim::ProcessGid), as a
// RoCE v2 port with that loopback address has it.
void FillGid(ibv_gid* gid) { sim::ProcessGid(gid->raw); }

// ---- The extended ops of the context's verbs_context (sim/device.h), for verbs.h's inline
// extended verbs. Only these are set; the inline verbs of every other op (ibv_alloc_td,
// ibv_advise_mr, ibv_alloc_dm, ...) find it NULL and fail with EOPNOTSUPP / ENOSYS, or take
// their legacy path, as on a provider without the feature. -----------------------------------

// ibv_query_device_ex: the device's limits and capabilities (the active profile's), the
// fields that fit in the caller's attr_size (a program built against older headers passes a
// smaller one; the rest of its struct is untouched), as rdma-core's ibv_cmd_query_device_any.
int OpQueryDeviceEx(ibv_context* context, const ibv_query_device_ex_input* input,
                    ibv_device_attr_ex* attr, size_t attr_size) {
  if (!IsTheContext(context) || (input != nullptr && input->comp_mask != 0)) return EINVAL;
  if (attr == nullptr || attr_size < sizeof(ibv_device_attr)) return EINVAL;
  Backend* backend = TheBackend();
  if (backend == nullptr) return EINVAL;
  ibv_device_attr_ex full;
  std::memset(&full, 0, sizeof(full));
  const int err = backend->IbvQueryDeviceEx(context, &full);
  if (err != 0) return ToErrno(err);
  std::memcpy(attr, &full, std::min(attr_size, sizeof(full)));
  return 0;
}

// ibv_query_port: the whole ibv_port_attr (FillPort), the part that fits in port_attr_len.
int OpQueryPort(ibv_context* context, uint8_t port_num, ibv_port_attr* port_attr,
                size_t port_attr_len) {
  if (!IsTheContext(context) || port_attr == nullptr) return EINVAL;
  if (port_attr_len < offsetof(ibv_port_attr, flags)) return EINVAL;
  if (port_num != kPortNum) return EINVAL;
  ibv_port_attr attr;
  FillPort(&attr);
  std::memcpy(port_attr, &attr, std::min(port_attr_len, sizeof(attr)));
  return 0;
}

// ibv_create_qp_ex with more than the PD in comp_mask (verbs.h calls ibv_create_qp for that):
// send_ops_flags gives an extended QP, whose ibv_wr_* builders the simulator sets.
ibv_qp* OpCreateQpEx(ibv_context* context, ibv_qp_init_attr_ex* attr) {
  Backend* backend = TheBackend();
  if (backend == nullptr || !IsTheContext(context)) return NullWithErrno<ibv_qp>(EINVAL);
  ibv_qp* qp = nullptr;
  const int err = backend->IbvCreateQpEx(context, attr, &qp);
  return err == 0 ? qp : NullWithErrno<ibv_qp>(err);
}

// ibv_create_cq_ex: the Backend's extended CQ (sim/cq.h), NULL + errno on failure. Its
// ibv_start_poll / ibv_next_poll / ibv_end_poll / ibv_wc_read_* are the CQ's own ops (set by the
// simulator, as a provider sets them); ibv_destroy_cq destroys it.
ibv_cq_ex* OpCreateCqEx(ibv_context* context, ibv_cq_init_attr_ex* attr) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return nullptr;  // errno EINVAL
  ibv_cq_ex* cq = nullptr;
  const int err = backend->IbvCreateCqEx(context, attr, &cq);
  return err == 0 ? cq : NullWithErrno<ibv_cq_ex>(err);
}

// Before the context is first handed out (TheContext).
void InstallExtendedOps(ibv_context* context) {
  verbs_context* vctx = verbs_get_ctx(context);
  if (vctx == nullptr) return;  // (the simulator always makes a verbs_context)
  vctx->query_device_ex = &OpQueryDeviceEx;
  vctx->query_port = &OpQueryPort;
  vctx->create_cq_ex = &OpCreateCqEx;
  vctx->create_qp_ex = &OpCreateQpEx;
}

// The QPs of rdma_create_qp, by QP (softrpma_shim_qp_made).
class QpIds final {
 public:
  void Add(ibv_qp* qp, rdma_cm_id* id) {
    softrpma::MutexLock lock(&mu_);
    ids_[qp] = id;
  }
  void Remove(ibv_qp* qp) {
    softrpma::MutexLock lock(&mu_);
    ids_.erase(qp);
  }
  // The id of `qp`, forgotten; nullptr when rdma_create_qp did not make it.
  rdma_cm_id* Take(ibv_qp* qp) {
    softrpma::MutexLock lock(&mu_);
    auto it = ids_.find(qp);
    if (it == ids_.end()) return nullptr;
    rdma_cm_id* id = it->second;
    ids_.erase(it);
    return id;
  }

 private:
  softrpma::Mutex mu_;
  absl::flat_hash_map<ibv_qp*, rdma_cm_id*> ids_ ABSL_GUARDED_BY(mu_);
};

QpIds& TheQpIds() {
  static QpIds* ids = new QpIds();  // never destroyed: used until exit
  return *ids;
}

// The fields ibv_sa_path_rec and the kernel's ib_user_path_rec share by name, converted each to
// the destination's type (the GIDs differ in form and are copied by the callers).
template <typename Dst, typename Src>
void CopyPathRecScalars(Dst* dst, const Src* src) {
  dst->dlid = static_cast<decltype(dst->dlid)>(src->dlid);
  dst->slid = static_cast<decltype(dst->slid)>(src->slid);
  dst->raw_traffic = static_cast<decltype(dst->raw_traffic)>(src->raw_traffic);
  dst->flow_label = static_cast<decltype(dst->flow_label)>(src->flow_label);
  dst->hop_limit = static_cast<decltype(dst->hop_limit)>(src->hop_limit);
  dst->traffic_class = static_cast<decltype(dst->traffic_class)>(src->traffic_class);
  dst->reversible = static_cast<decltype(dst->reversible)>(src->reversible);
  dst->numb_path = static_cast<decltype(dst->numb_path)>(src->numb_path);
  dst->pkey = static_cast<decltype(dst->pkey)>(src->pkey);
  dst->sl = static_cast<decltype(dst->sl)>(src->sl);
  dst->mtu_selector = static_cast<decltype(dst->mtu_selector)>(src->mtu_selector);
  dst->mtu = static_cast<decltype(dst->mtu)>(src->mtu);
  dst->rate_selector = static_cast<decltype(dst->rate_selector)>(src->rate_selector);
  dst->rate = static_cast<decltype(dst->rate)>(src->rate);
  dst->packet_life_time_selector =
      static_cast<decltype(dst->packet_life_time_selector)>(src->packet_life_time_selector);
  dst->packet_life_time = static_cast<decltype(dst->packet_life_time)>(src->packet_life_time);
  dst->preference = static_cast<decltype(dst->preference)>(src->preference);
}

}  // namespace
}  // namespace softrpma::shim

using softrpma::Backend;
using softrpma::shim::CopyPathRecScalars;
using softrpma::shim::IsTheContext;
using softrpma::shim::IsTheDevice;
using softrpma::shim::NullWithErrno;
using softrpma::shim::TheBackend;
using softrpma::shim::TheContext;
using softrpma::shim::ToErrno;

extern "C" {

softrpma::Backend* softrpma_shim_backend(void) { return TheBackend(); }

void softrpma_shim_qp_made(ibv_qp* qp, rdma_cm_id* id) {
  softrpma::shim::TheQpIds().Add(qp, id);
}
void softrpma_shim_qp_gone(ibv_qp* qp) { softrpma::shim::TheQpIds().Remove(qp); }

// ---- Devices ---------------------------------------------------------------------------------

#undef ibv_get_device_list  // (verbs.h's inline wrapper calls ibv_static_providers first)
ibv_device** ibv_get_device_list(int* num_devices) {
  ibv_context* context = TheContext();
  if (context == nullptr) {
    if (num_devices != nullptr) *num_devices = 0;
    return nullptr;  // errno EINVAL
  }
  ibv_device** list = static_cast<ibv_device**>(calloc(2, sizeof(ibv_device*)));
  if (list == nullptr) return NullWithErrno<ibv_device*>(ENOMEM);
  list[0] = context->device;
  if (num_devices != nullptr) *num_devices = 1;
  return list;
}

void ibv_free_device_list(ibv_device** list) { free(list); }

const char* ibv_get_device_name(ibv_device* device) {
  return device != nullptr ? device->name : nullptr;
}

__be64 ibv_get_device_guid(ibv_device* device) {
  ibv_context* context = TheContext();
  if (context == nullptr || device != context->device) return 0;
  ibv_device_attr attr;
  if (ibv_query_device(context, &attr) != 0) return 0;
  return attr.node_guid;
}

int ibv_get_device_index(ibv_device* device) { return IsTheDevice(device) ? 0 : -1; }

ibv_context* ibv_open_device(ibv_device* device) {
  if (!IsTheDevice(device)) return NullWithErrno<ibv_context>(ENODEV);
  return TheContext();
}

int ibv_close_device(ibv_context* context) { return IsTheContext(context) ? 0 : EINVAL; }

ibv_context* ibv_import_device(int cmd_fd) { return NullWithErrno<ibv_context>(EOPNOTSUPP); }

int ibv_query_device(ibv_context* context, ibv_device_attr* device_attr) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return EINVAL;
  if (device_attr == nullptr) return EINVAL;
  ibv_device_attr_ex attr_ex;
  const int err = backend->IbvQueryDeviceEx(context, &attr_ex);
  if (err != 0) return ToErrno(err);
  *device_attr = attr_ex.orig_attr;
  return 0;
}

// The out-of-line ibv_query_port takes the compat struct (the fields up to link_layer); verbs.h
// has zeroed the caller's whole ibv_port_attr before calling.
#undef ibv_query_port
int ibv_query_port(ibv_context* context, uint8_t port_num, _compat_ibv_port_attr* port_attr) {
  if (!IsTheContext(context) || port_attr == nullptr) return EINVAL;
  if (port_num != softrpma::shim::kPortNum) return EINVAL;
  ibv_port_attr attr;
  softrpma::shim::FillPort(&attr);
  std::memcpy(port_attr, &attr, offsetof(ibv_port_attr, flags));
  return 0;
}

int ibv_query_gid(ibv_context* context, uint8_t port_num, int index, ibv_gid* gid) {
  if (!IsTheContext(context) || gid == nullptr || port_num != softrpma::shim::kPortNum ||
      !softrpma::shim::InGidTable(index)) {
    return -1;  // as rdma-core's: -1 for a bad port or index
  }
  if (index != 0) {  // an empty entry: rdma-core's ibv_query_gid gives a zero GID
    std::memset(gid, 0, sizeof(*gid));
    return 0;
  }
  softrpma::shim::FillGid(gid);
  return 0;
}

int ibv_query_gid_type(ibv_context* context, uint8_t port_num, unsigned int index,
                       ibv_gid_type_sysfs* type) {
  if (!IsTheContext(context) || type == nullptr || port_num != softrpma::shim::kPortNum ||
      !softrpma::shim::InGidTable(index)) {
    errno = EINVAL;
    return -1;
  }
  // An empty entry: rdma-core's ibv_query_gid_type answers RoCE v1 (its ENODATA case).
  *type = index == 0 ? IBV_GID_TYPE_SYSFS_ROCE_V2 : IBV_GID_TYPE_SYSFS_IB_ROCE_V1;
  return 0;
}

int _ibv_query_gid_ex(ibv_context* context, uint32_t port_num, uint32_t gid_index,
                      ibv_gid_entry* entry, uint32_t flags, size_t entry_size) {
  if (!IsTheContext(context) || entry == nullptr || flags != 0 ||
      entry_size < sizeof(ibv_gid_entry)) {
    return EINVAL;
  }
  if (port_num != softrpma::shim::kPortNum || gid_index != 0) return ENODATA;
  std::memset(entry, 0, sizeof(*entry));
  softrpma::shim::FillGid(&entry->gid);
  entry->gid_index = 0;
  entry->port_num = port_num;
  entry->gid_type = IBV_GID_TYPE_ROCE_V2;
  entry->ndev_ifindex = 1;  // lo
  return 0;
}

ssize_t _ibv_query_gid_table(ibv_context* context, ibv_gid_entry* entries, size_t max_entries,
                             uint32_t flags, size_t entry_size) {
  if (!IsTheContext(context) || flags != 0 || entry_size < sizeof(ibv_gid_entry)) {
    return -EINVAL;
  }
  // rdma-core's answer (the kernel's QUERY_GID_TABLE): EINVAL when the table does not fit, and
  // so for room for 0 entries; the table here has one.
  if (max_entries == 0 || entries == nullptr) return -EINVAL;
  const int err = _ibv_query_gid_ex(context, softrpma::shim::kPortNum, 0, entries, 0, entry_size);
  return err == 0 ? 1 : -err;
}

int ibv_query_pkey(ibv_context* context, uint8_t port_num, int index, __be16* pkey) {
  // rdma-core reads the port's sysfs pkeys/<index>: -1 past the table, and for every index on
  // a port without one (siw's).
  if (!IsTheContext(context) || pkey == nullptr || port_num != softrpma::shim::kPortNum ||
      index != 0 || !softrpma::shim::InPkeyTable(index)) {
    return -1;
  }
  *pkey = htons(softrpma::shim::kDefaultPkey);
  return 0;
}

int ibv_get_pkey_index(ibv_context* context, uint8_t port_num, __be16 pkey) {
  if (!IsTheContext(context) || port_num != softrpma::shim::kPortNum) return -EINVAL;
  if (!softrpma::shim::InPkeyTable(0)) return -1;  // no table: rdma-core's ibv_query_pkey's -1
  return ntohs(pkey) == softrpma::shim::kDefaultPkey ? 0 : -ENOENT;
}

// ---- Protection domains and memory regions ----------------------------------------------------

ibv_pd* ibv_alloc_pd(ibv_context* context) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return nullptr;
  ibv_pd* pd = nullptr;
  const int err = backend->IbvAllocPd(context, &pd);
  return err == 0 ? pd : NullWithErrno<ibv_pd>(err);
}

int ibv_dealloc_pd(ibv_pd* pd) {
  Backend* backend = TheBackend();
  return backend == nullptr ? EINVAL : ToErrno(backend->IbvDeallocPd(pd));
}

ibv_pd* ibv_import_pd(ibv_context* context, uint32_t pd_handle) {
  return NullWithErrno<ibv_pd>(EOPNOTSUPP);
}
void ibv_unimport_pd(ibv_pd* pd) {}

#undef ibv_reg_mr
ibv_mr* ibv_reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return nullptr;
  ibv_mr* mr = nullptr;
  const int err = backend->IbvRegMr(pd, addr, length, access, &mr);
  return err == 0 ? mr : NullWithErrno<ibv_mr>(err);
}

ibv_mr* ibv_reg_mr_iova2(ibv_pd* pd, void* addr, size_t length, uint64_t iova,
                         unsigned int access) {
  // The simulator's MRs are addressed by virtual address: another iova is not modelled.
  if (iova != reinterpret_cast<uintptr_t>(addr)) return NullWithErrno<ibv_mr>(EOPNOTSUPP);
  return ibv_reg_mr(pd, addr, length, static_cast<int>(access));
}

#undef ibv_reg_mr_iova
ibv_mr* ibv_reg_mr_iova(ibv_pd* pd, void* addr, size_t length, uint64_t iova, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, iova, static_cast<unsigned int>(access));
}

ibv_mr* ibv_reg_dmabuf_mr(ibv_pd* pd, uint64_t offset, size_t length, uint64_t iova, int fd,
                          int access) {
  return NullWithErrno<ibv_mr>(EOPNOTSUPP);
}

int ibv_rereg_mr(ibv_mr* mr, int flags, ibv_pd* pd, void* addr, size_t length, int access) {
  errno = EOPNOTSUPP;
  return IBV_REREG_MR_ERR_INPUT;
}

int ibv_dereg_mr(ibv_mr* mr) {
  Backend* backend = TheBackend();
  return backend == nullptr ? EINVAL : ToErrno(backend->IbvDeregMr(mr));
}

ibv_mr* ibv_import_mr(ibv_pd* pd, uint32_t mr_handle) {
  return NullWithErrno<ibv_mr>(EOPNOTSUPP);
}
void ibv_unimport_mr(ibv_mr* mr) {}

ibv_dm* ibv_import_dm(ibv_context* context, uint32_t dm_handle) {
  return NullWithErrno<ibv_dm>(EOPNOTSUPP);
}
void ibv_unimport_dm(ibv_dm* dm) {}

// ---- Completion channels and CQs ----------------------------------------------------------------

ibv_comp_channel* ibv_create_comp_channel(ibv_context* context) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return nullptr;
  ibv_comp_channel* channel = nullptr;
  const int err = backend->IbvCreateCompChannel(context, &channel);
  return err == 0 ? channel : NullWithErrno<ibv_comp_channel>(err);
}

int ibv_destroy_comp_channel(ibv_comp_channel* channel) {
  Backend* backend = TheBackend();
  return backend == nullptr ? EINVAL : ToErrno(backend->IbvDestroyCompChannel(channel));
}

ibv_cq* ibv_create_cq(ibv_context* context, int cqe, void* cq_context, ibv_comp_channel* channel,
                      int comp_vector) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return nullptr;
  ibv_cq* cq = nullptr;
  const int err = backend->IbvCreateCq(context, cqe, cq_context, channel, comp_vector, &cq);
  return err == 0 ? cq : NullWithErrno<ibv_cq>(err);
}

int ibv_resize_cq(ibv_cq* cq, int cqe) { return EOPNOTSUPP; }

int ibv_destroy_cq(ibv_cq* cq) {
  Backend* backend = TheBackend();
  return backend == nullptr ? EINVAL : ToErrno(backend->IbvDestroyCq(cq));
}

int ibv_get_cq_event(ibv_comp_channel* channel, ibv_cq** cq, void** cq_context) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return -1;
  const int err = backend->IbvGetCqEvent(channel, cq, cq_context);
  if (err == 0) return 0;
  errno = ToErrno(err);
  return -1;
}

void ibv_ack_cq_events(ibv_cq* cq, unsigned int nevents) {
  if (Backend* backend = TheBackend()) backend->IbvAckCqEvents(cq, nevents);
}

int ibv_get_async_event(ibv_context* context, ibv_async_event* event) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return -1;
  const int err = backend->IbvGetAsyncEvent(context, event);
  if (err == 0) return 0;
  errno = ToErrno(err);
  return -1;
}

void ibv_ack_async_event(ibv_async_event* event) {
  if (Backend* backend = TheBackend()) backend->IbvAckAsyncEvent(event);
}

// ---- SRQs ---------------------------------------------------------------------------------------

ibv_srq* ibv_create_srq(ibv_pd* pd, ibv_srq_init_attr* srq_init_attr) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return nullptr;
  ibv_srq* srq = nullptr;
  const int err = backend->IbvCreateSrq(pd, srq_init_attr, &srq);
  return err == 0 ? srq : NullWithErrno<ibv_srq>(err);
}

int ibv_modify_srq(ibv_srq* srq, ibv_srq_attr* srq_attr, int srq_attr_mask) { return EOPNOTSUPP; }
int ibv_query_srq(ibv_srq* srq, ibv_srq_attr* srq_attr) { return EOPNOTSUPP; }

int ibv_destroy_srq(ibv_srq* srq) {
  Backend* backend = TheBackend();
  return backend == nullptr ? EINVAL : ToErrno(backend->IbvDestroySrq(srq));
}

// ---- QPs: of rdma_create_qp, or of ibv_create_qp connected by ibv_modify_qp (shim.h) ---------

ibv_qp* ibv_create_qp(ibv_pd* pd, ibv_qp_init_attr* qp_init_attr) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return NullWithErrno<ibv_qp>(EINVAL);
  ibv_qp* qp = nullptr;
  const int err = backend->IbvCreateQp(pd, qp_init_attr, &qp);
  return err == 0 ? qp : NullWithErrno<ibv_qp>(ToErrno(err));
}
int ibv_modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) {
  Backend* backend = TheBackend();
  return backend == nullptr ? EINVAL : ToErrno(backend->IbvModifyQp(qp, attr, attr_mask));
}
int ibv_query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask, ibv_qp_init_attr* init_attr) {
  Backend* backend = TheBackend();
  return backend == nullptr ? EINVAL
                            : ToErrno(backend->IbvQueryQp(qp, attr, attr_mask, init_attr));
}
// A QP of rdma_create_qp: what rdma_destroy_qp does (the id's qp becomes NULL there too).
int ibv_destroy_qp(ibv_qp* qp) {
  Backend* backend = TheBackend();
  if (backend == nullptr || qp == nullptr) return EINVAL;
  rdma_cm_id* id = softrpma::shim::TheQpIds().Take(qp);
  if (id == nullptr) return ToErrno(backend->IbvDestroyQp(qp));
  backend->RdmaDestroyQp(id);
  return 0;
}

ibv_qp_ex* ibv_qp_to_qp_ex(ibv_qp* qp) {
  Backend* backend = TheBackend();
  if (backend == nullptr) return nullptr;
  ibv_qp_ex* qpx = nullptr;
  return backend->IbvQpToQpEx(qp, &qpx) == 0 ? qpx : nullptr;  // (verbs sets no errno)
}

int ibv_query_qp_data_in_order(ibv_qp* qp, ibv_wr_opcode op, uint32_t flags) { return 0; }
int ibv_set_ece(ibv_qp* qp, ibv_ece* ece) { return EOPNOTSUPP; }
int ibv_query_ece(ibv_qp* qp, ibv_ece* ece) { return EOPNOTSUPP; }

// ---- Address handles (UD; docs/DEVICES.md, "UD QPs"); no multicast -------------------------------

ibv_ah* ibv_create_ah(ibv_pd* pd, ibv_ah_attr* attr) {
  Backend* backend = TheBackend();
  if (backend == nullptr || pd == nullptr) return NullWithErrno<ibv_ah>(EINVAL);
  ibv_ah* ah = nullptr;
  const int err = backend->IbvCreateAh(pd, attr, &ah);
  return err == 0 ? ah : NullWithErrno<ibv_ah>(err);
}

int ibv_destroy_ah(ibv_ah* ah) {
  Backend* backend = TheBackend();
  if (backend == nullptr || ah == nullptr) return EINVAL;
  return ToErrno(backend->IbvDestroyAh(ah));
}

namespace {

// The index of `gid` in the port's GID table (RoCE v2 entries: the one populated entry), or -1
// (rdma-core's ibv_find_gid_index, which walks the table until ibv_query_gid fails).
int FindGidIndex(ibv_context* context, uint8_t port_num, const uint8_t gid[16]) {
  ibv_gid own;
  if (ibv_query_gid(context, port_num, 0, &own) != 0) return -1;
  return std::memcmp(own.raw, gid, sizeof(own.raw)) == 0 ? 0 : -1;
}

// An IPv4 address as the IPv4-mapped GID ::ffff:a.b.c.d.
void MapIpv4(const uint8_t address[4], uint8_t gid[16]) {
  std::memset(gid, 0, 16);
  gid[10] = 0xff;
  gid[11] = 0xff;
  std::memcpy(gid + 12, address, 4);
}

// Whether the 20 bytes at `ip` are an IPv4 header with a valid checksum (RoCE v2 over IPv4: the
// last 20 bytes of a UD receive's 40-byte GRH).
bool ValidIpv4Header(const uint8_t* ip) {
  if (ip[0] != 0x45) return false;
  uint32_t sum = 0;
  for (int i = 0; i < 20; i += 2) sum += (uint32_t{ip[i]} << 8) | ip[i + 1];
  while ((sum >> 16) != 0) sum = (sum & 0xffff) + (sum >> 16);
  return sum == 0xffff;
}

}  // namespace

// rdma-core's: the AV that answers the sender of a UD receive. The GRH is read as RoCE v2 over
// IPv4 when its last 20 bytes are a valid IPv4 header, else as an IPv6 / IB GRH.
int ibv_init_ah_from_wc(ibv_context* context, uint8_t port_num, ibv_wc* wc, ibv_grh* grh,
                        ibv_ah_attr* ah_attr) {
  if (context == nullptr || wc == nullptr || ah_attr == nullptr) return EINVAL;
  std::memset(ah_attr, 0, sizeof(*ah_attr));
  ah_attr->dlid = wc->slid;
  ah_attr->sl = wc->sl;
  ah_attr->src_path_bits = wc->dlid_path_bits;
  ah_attr->port_num = port_num;
  if ((wc->wc_flags & IBV_WC_GRH) == 0) return 0;
  if (grh == nullptr) return EINVAL;
  ah_attr->is_global = 1;
  const auto* raw = reinterpret_cast<const uint8_t*>(grh);
  const uint32_t flow = ntohl(grh->version_tclass_flow);
  const uint8_t* ip = raw + 20;
  uint8_t own[16];
  int index = -1;
  if (((flow >> 28) != 6 && (ip[0] >> 4) == 4) || ((flow >> 28) == 6 && ValidIpv4Header(ip))) {
    if ((ip[16] & 0xf0) == 0xe0) {  // a multicast destination is in no GID table
      errno = EINVAL;
      return -1;
    }
    MapIpv4(ip + 16, own);
    index = FindGidIndex(context, port_num, own);
    MapIpv4(ip + 12, ah_attr->grh.dgid.raw);
    ah_attr->grh.hop_limit = ip[8];
    ah_attr->grh.traffic_class = ip[1];
  } else if ((flow >> 28) == 6) {
    if (grh->dgid.raw[0] == 0xff || (grh->next_hdr != IPPROTO_UDP && grh->next_hdr != 0x1b)) {
      errno = grh->dgid.raw[0] == 0xff ? EINVAL : EPROTONOSUPPORT;
      return -1;
    }
    index = FindGidIndex(context, port_num, grh->dgid.raw);
    ah_attr->grh.dgid = grh->sgid;
    ah_attr->grh.hop_limit = grh->hop_limit;
    ah_attr->grh.traffic_class = static_cast<uint8_t>((flow >> 20) & 0xff);
  } else {
    errno = EPROTONOSUPPORT;
    return -1;
  }
  if (index < 0) return -1;
  ah_attr->grh.sgid_index = static_cast<uint8_t>(index);
  return 0;
}

ibv_ah* ibv_create_ah_from_wc(ibv_pd* pd, ibv_wc* wc, ibv_grh* grh, uint8_t port_num) {
  if (pd == nullptr) return NullWithErrno<ibv_ah>(EINVAL);
  ibv_ah_attr attr;
  if (ibv_init_ah_from_wc(pd->context, port_num, wc, grh, &attr) != 0) return nullptr;
  return ibv_create_ah(pd, &attr);
}

int ibv_attach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) { return EOPNOTSUPP; }
int ibv_detach_mcast(ibv_qp* qp, const ibv_gid* gid, uint16_t lid) { return EOPNOTSUPP; }
int ibv_resolve_eth_l2_from_gid(ibv_context* context, ibv_ah_attr* attr, uint8_t eth_mac[6],
                                uint16_t* vid) {
  return EOPNOTSUPP;
}

// ---- Fork: the simulator pins no pages, so fork needs nothing (a child gets its own NIC) --------

int ibv_fork_init(void) { return 0; }
ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
int ibv_dontfork_range(void* base, size_t size) { return 0; }
int ibv_dofork_range(void* base, size_t size) { return 0; }

// ---- sysfs helpers: real files -----------------------------------------------------------------

const char* ibv_get_sysfs_path(void) {
  const char* env = getenv("SYSFS_PATH");  // rdma-core's override
  return env != nullptr && *env != '\0' ? env : "/sys";
}

int ibv_read_sysfs_file(const char* dir, const char* file, char* buf, size_t size) {
  if (dir == nullptr || file == nullptr || buf == nullptr || size == 0) {
    errno = EINVAL;
    return -1;
  }
  char path[4096];
  if (std::snprintf(path, sizeof(path), "%s/%s", dir, file) >= static_cast<int>(sizeof(path))) {
    errno = ENAMETOOLONG;
    return -1;
  }
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  const ssize_t len = read(fd, buf, size);
  const int err = errno;
  close(fd);
  if (len < 0) {
    errno = err;
    return -1;
  }
  if (len == static_cast<ssize_t>(size)) {  // no room for the terminator
    buf[size - 1] = '\0';
    errno = EOVERFLOW;
    return -1;
  }
  buf[len] = '\0';
  if (len > 0 && buf[len - 1] == '\n') buf[len - 1] = '\0';
  return static_cast<int>(len);
}

// ---- Strings and rates (named after the enums of verbs.h) --------------------------------------

const char* ibv_node_type_str(ibv_node_type node_type) {
  switch (node_type) {
    case IBV_NODE_CA: return "InfiniBand channel adapter";
    case IBV_NODE_SWITCH: return "InfiniBand switch";
    case IBV_NODE_ROUTER: return "InfiniBand router";
    case IBV_NODE_RNIC: return "iWARP NIC";
    case IBV_NODE_USNIC: return "usNIC";
    case IBV_NODE_USNIC_UDP: return "usNIC UDP";
    case IBV_NODE_UNSPECIFIED: return "unspecified";
    default: return "unknown";
  }
}

const char* ibv_port_state_str(ibv_port_state port_state) {
  switch (port_state) {
    case IBV_PORT_NOP: return "PORT_NOP";
    case IBV_PORT_DOWN: return "PORT_DOWN";
    case IBV_PORT_INIT: return "PORT_INIT";
    case IBV_PORT_ARMED: return "PORT_ARMED";
    case IBV_PORT_ACTIVE: return "PORT_ACTIVE";
    case IBV_PORT_ACTIVE_DEFER: return "PORT_ACTIVE_DEFER";
    default: return "invalid state";
  }
}

const char* ibv_event_type_str(ibv_event_type event) {
  switch (event) {
    case IBV_EVENT_CQ_ERR: return "CQ error";
    case IBV_EVENT_QP_FATAL: return "QP fatal error";
    case IBV_EVENT_QP_REQ_ERR: return "QP request error";
    case IBV_EVENT_QP_ACCESS_ERR: return "QP access error";
    case IBV_EVENT_COMM_EST: return "communication established";
    case IBV_EVENT_SQ_DRAINED: return "send queue drained";
    case IBV_EVENT_PATH_MIG: return "path migrated";
    case IBV_EVENT_PATH_MIG_ERR: return "path migration error";
    case IBV_EVENT_DEVICE_FATAL: return "device fatal error";
    case IBV_EVENT_PORT_ACTIVE: return "port active";
    case IBV_EVENT_PORT_ERR: return "port error";
    case IBV_EVENT_LID_CHANGE: return "LID changed";
    case IBV_EVENT_PKEY_CHANGE: return "P_Key changed";
    case IBV_EVENT_SM_CHANGE: return "SM changed";
    case IBV_EVENT_SRQ_ERR: return "SRQ error";
    case IBV_EVENT_SRQ_LIMIT_REACHED: return "SRQ limit reached";
    case IBV_EVENT_QP_LAST_WQE_REACHED: return "last WQE reached";
    case IBV_EVENT_CLIENT_REREGISTER: return "client reregistration";
    case IBV_EVENT_GID_CHANGE: return "GID table changed";
    case IBV_EVENT_WQ_FATAL: return "WQ fatal error";
    default: return "unknown";
  }
}

const char* ibv_wc_status_str(ibv_wc_status status) {
  switch (status) {
    case IBV_WC_SUCCESS: return "success";
    case IBV_WC_LOC_LEN_ERR: return "local length error";
    case IBV_WC_LOC_QP_OP_ERR: return "local QP operation error";
    case IBV_WC_LOC_EEC_OP_ERR: return "local EE context operation error";
    case IBV_WC_LOC_PROT_ERR: return "local protection error";
    case IBV_WC_WR_FLUSH_ERR: return "Work Request Flushed Error";
    case IBV_WC_MW_BIND_ERR: return "memory window bind error";
    case IBV_WC_BAD_RESP_ERR: return "bad response error";
    case IBV_WC_LOC_ACCESS_ERR: return "local access error";
    case IBV_WC_REM_INV_REQ_ERR: return "remote invalid request error";
    case IBV_WC_REM_ACCESS_ERR: return "remote access error";
    case IBV_WC_REM_OP_ERR: return "remote operation error";
    case IBV_WC_RETRY_EXC_ERR: return "transport retry counter exceeded";
    case IBV_WC_RNR_RETRY_EXC_ERR: return "RNR retry counter exceeded";
    case IBV_WC_LOC_RDD_VIOL_ERR: return "local RDD violation error";
    case IBV_WC_REM_INV_RD_REQ_ERR: return "remote invalid RD request";
    case IBV_WC_REM_ABORT_ERR: return "aborted error";
    case IBV_WC_INV_EECN_ERR: return "invalid EE context number";
    case IBV_WC_INV_EEC_STATE_ERR: return "invalid EE context state";
    case IBV_WC_FATAL_ERR: return "fatal error";
    case IBV_WC_RESP_TIMEOUT_ERR: return "response timeout error";
    case IBV_WC_GENERAL_ERR: return "general error";
    case IBV_WC_TM_ERR: return "TM error";
    case IBV_WC_TM_RNDV_INCOMPLETE: return "TM software rendezvous";
    default: return "unknown";
  }
}

namespace {
// One row per ibv_rate: its multiple of 2.5 Gb/s (-1 where it is none) and its Mb/s.
struct RateRow {
  ibv_rate rate;
  int mult;
  int mbps;
};
constexpr RateRow kRates[] = {
    {IBV_RATE_2_5_GBPS, 1, 2500},     {IBV_RATE_5_GBPS, 2, 5000},
    {IBV_RATE_10_GBPS, 4, 10000},     {IBV_RATE_20_GBPS, 8, 20000},
    {IBV_RATE_30_GBPS, 12, 30000},    {IBV_RATE_40_GBPS, 16, 40000},
    {IBV_RATE_60_GBPS, 24, 60000},    {IBV_RATE_80_GBPS, 32, 80000},
    {IBV_RATE_120_GBPS, 48, 120000},  {IBV_RATE_14_GBPS, -1, 14062},
    {IBV_RATE_56_GBPS, -1, 56250},    {IBV_RATE_112_GBPS, -1, 112500},
    {IBV_RATE_168_GBPS, -1, 168750},  {IBV_RATE_25_GBPS, 10, 25781},
    {IBV_RATE_100_GBPS, 40, 103125},  {IBV_RATE_200_GBPS, 80, 206250},
    {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
    {IBV_RATE_50_GBPS, 20, 53125},    {IBV_RATE_400_GBPS, 160, 425000},
    {IBV_RATE_600_GBPS, 240, 637500}, {IBV_RATE_800_GBPS, 320, 850000},
    {IBV_RATE_1200_GBPS, 480, 1275000},
};
}  // namespace

int ibv_rate_to_mult(ibv_rate rate) {
  for (const RateRow& row : kRates) {
    if (row.rate == rate) return row.mult;
  }
  return -1;
}

ibv_rate mult_to_ibv_rate(int mult) {
  for (const RateRow& row : kRates) {
    if (row.mult == mult && mult > 0) return row.rate;
  }
  return IBV_RATE_MAX;
}

int ibv_rate_to_mbps(ibv_rate rate) {
  for (const RateRow& row : kRates) {
    if (row.rate == rate) return row.mbps;
  }
  return -1;
}

ibv_rate mbps_to_ibv_rate(int mbps) {
  for (const RateRow& row : kRates) {
    if (row.mbps == mbps) return row.rate;
  }
  return IBV_RATE_MAX;
}

// ---- The kernel ABI copies (librdmacm's old paths call them) -----------------------------------

void ibv_copy_ah_attr_from_kern(ibv_ah_attr* dst, ib_uverbs_ah_attr* src) {
  std::memcpy(dst->grh.dgid.raw, src->grh.dgid, sizeof(dst->grh.dgid.raw));
  dst->grh.flow_label = src->grh.flow_label;
  dst->grh.sgid_index = src->grh.sgid_index;
  dst->grh.hop_limit = src->grh.hop_limit;
  dst->grh.traffic_class = src->grh.traffic_class;
  dst->dlid = src->dlid;
  dst->sl = src->sl;
  dst->src_path_bits = src->src_path_bits;
  dst->static_rate = src->static_rate;
  dst->is_global = src->is_global;
  dst->port_num = src->port_num;
}

void ibv_copy_qp_attr_from_kern(ibv_qp_attr* dst, ib_uverbs_qp_attr* src) {
  dst->qp_state = static_cast<ibv_qp_state>(src->qp_state);
  dst->cur_qp_state = static_cast<ibv_qp_state>(src->cur_qp_state);
  dst->path_mtu = static_cast<ibv_mtu>(src->path_mtu);
  dst->path_mig_state = static_cast<ibv_mig_state>(src->path_mig_state);
  dst->qkey = src->qkey;
  dst->rq_psn = src->rq_psn;
  dst->sq_psn = src->sq_psn;
  dst->dest_qp_num = src->dest_qp_num;
  dst->qp_access_flags = static_cast<int>(src->qp_access_flags);
  dst->cap.max_send_wr = src->max_send_wr;
  dst->cap.max_recv_wr = src->max_recv_wr;
  dst->cap.max_send_sge = src->max_send_sge;
  dst->cap.max_recv_sge = src->max_recv_sge;
  dst->cap.max_inline_data = src->max_inline_data;
  ibv_copy_ah_attr_from_kern(&dst->ah_attr, &src->ah_attr);
  ibv_copy_ah_attr_from_kern(&dst->alt_ah_attr, &src->alt_ah_attr);
  dst->pkey_index = src->pkey_index;
  dst->alt_pkey_index = src->alt_pkey_index;
  dst->en_sqd_async_notify = src->en_sqd_async_notify;
  dst->sq_draining = src->sq_draining;
  dst->max_rd_atomic = src->max_rd_atomic;
  dst->max_dest_rd_atomic = src->max_dest_rd_atomic;
  dst->min_rnr_timer = src->min_rnr_timer;
  dst->port_num = src->port_num;
  dst->timeout = src->timeout;
  dst->retry_cnt = src->retry_cnt;
  dst->rnr_retry = src->rnr_retry;
  dst->alt_port_num = src->alt_port_num;
  dst->alt_timeout = src->alt_timeout;
}

void ibv_copy_path_rec_from_kern(ibv_sa_path_rec* dst, ib_user_path_rec* src) {
  std::memcpy(dst->dgid.raw, src->dgid, sizeof(dst->dgid.raw));
  std::memcpy(dst->sgid.raw, src->sgid, sizeof(dst->sgid.raw));
  CopyPathRecScalars(dst, src);
}

void ibv_copy_path_rec_to_kern(ib_user_path_rec* dst, ibv_sa_path_rec* src) {
  std::memcpy(dst->dgid, src->dgid.raw, sizeof(dst->dgid));
  std::memcpy(dst->sgid, src->sgid.raw, sizeof(dst->sgid));
  CopyPathRecScalars(dst, src);
}

}  // extern "C"
