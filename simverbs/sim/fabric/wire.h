// wire.h: the messages two simulated NICs in different processes exchange over the host
// transport (host.h): connection management (the IB CM's REQ / REP / REJ / RTU / DREQ / DREP;
// iWARP's exchange is carried by the same messages, cm.h)
// and the RC data path (requests and their responses). One header, then `body_len` bytes of
// body.
//
// Every message comes from another process and is UNTRUSTED: ValidateHeader checks the magic,
// the type and the body length that type allows before a byte of body is read, and every
// address, key and length in a request is checked against the responder's registered regions
// (nic/responder.cc) before memory is touched. A message that fails a check ends that connection only.
//
// The layout is native (both ends run on one machine, one ABI); a transport between machines
// will have its own wire (DESIGN.md: iWARP's framing).

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_WIRE_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_WIRE_H_

#include <sys/socket.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace softrpma::sim::wire {

inline constexpr uint32_t kMagic = 0x52504d35;  // "RPM5"
// The protocol's version, the last character of kMagic: processes of two versions do not talk.
// 2: the shared-memory rings (kShmRing); 3: CM bodies of variable length, private data up to
// kMaxPrivateData, and the 64-bit atomics (kCompareSwap, kFetchAdd); 4: UD datagrams (kQpBind
// to kUdBindQpNum, kUdSend); 5: SIDR, rdma_cm's UD exchange (kFlagSidr on kConnectRequest).
inline constexpr int kProtocolVersion = 5;
static_assert((kMagic & 0xff) == '0' + kProtocolVersion, "kMagic ends in kProtocolVersion");

enum class Type : uint16_t {
  // Connection management.
  kConnectRequest = 1,  // active -> passive: ConnectBody
  kAccept = 2,          // passive -> active: AcceptBody
  kReject = 3,          // passive -> active: RejectBody, header.status = the reject reason
  kReady = 4,           // active -> passive: the RTU (no body)
  kDisconnect = 5,      // either way: the DREQ (no body)
  kDisconnectReply = 6, // either way: the DREP answering a DREQ (no body)
  // A QP connected by ibv_modify_qp (no CM): the first message of a connection to the
  // process that owns the GID the QP's RTR named; QpBindBody. Its data-path requests follow on
  // the same connection (and their responses come back on it).
  // A kQpBind whose dst_qp_num is kUdBindQpNum: UD datagrams of the sending process, to any
  // UD QP of the receiving one, follow (kUdSend).
  kQpBind = 7,
  // The carrier's own (host.h, THE SHARED-MEMORY RINGS; never seen by a connection's handler):
  kShmRing = 8,    // ShmRingBody, with the sender's ring (shm/ring.h) as an SCM_RIGHTS memfd
  kShmSwitch = 9,  // no body: the sender's next messages are in the ring it offered
  // The data path: requests, each answered by exactly one response in order.
  kWrite = 16,        // body = the data; header.remote_addr / rkey; kFlagImm: with immediate
  kSend = 17,         // body = the message; kFlagImm, kFlagSolicited
  kRead = 18,         // header.remote_addr / rkey / length (no body)
  kAtomicWrite = 19,  // body = 8 bytes; header.remote_addr / rkey
  kCompareSwap = 20,  // body = AtomicOperands (compare, swap); header.remote_addr / rkey
  kFetchAdd = 21,     // body = the 8-byte addend; header.remote_addr / rkey
  // A UD datagram (not a request: nothing answers it): body = UdSendPrefix, then the message;
  // kFlagImm (header.imm_data), kFlagSolicited.
  kUdSend = 24,
  kAck = 32,          // responder -> requester: header.seq, header.status (an ibv_wc_status)
  // responder -> requester: header.seq, header.status, body = the data: a kRead's, or the 8
  // bytes the target held before a kCompareSwap / kFetchAdd
  kReadResponse = 33,
};

inline constexpr uint16_t kFlagImm = 1;
inline constexpr uint16_t kFlagSolicited = 2;
// CROSS-MEMORY ATTACH. On kWrite / kSend / kRead: the body is not the data but the requester's
// CmaSegments (its source, or for kRead its destination), header.length bytes in all; the
// responder copies between them and its own memory itself (process_vm_readv / writev, one
// copy). Sent only to a peer that proved it can (see ConnectBody). On kReadResponse: the data
// is in place already (no body). On kReady: the active side can reach the passive's memory.
inline constexpr uint16_t kFlagCma = 4;
inline constexpr int kMaxCmaSegments = 32;
// A fault broke the exchange (docs/FAULTS.md); the other end ends as this one did. On kReject:
// the passive side's accept broke before its REP (rdma_accept's `lost`): the active side gets
// RDMA_CM_EVENT_CONNECT_ERROR (-ECONNRESET), its QP in ERROR, instead of a REJ's REJECTED (the
// reason is ignored). On kDisconnect: the established connection broke (a post's `lost` or
// `disconnect`, rdma_accept's `disconnect`): the other end's QP goes to ERROR and it gets
// CONNECT_ERROR (-ECONNRESET) when header.status is not 0, else DISCONNECTED (status 0), and
// owes no DREP. On iWARP (the siw profile) kDisconnect + kFlagBroken with status 0 is also how
// every connection closes (rdma_disconnect, a destroyed id): iWARP has no DREQ / DREP.
inline constexpr uint16_t kFlagBroken = 8;
// On kConnectRequest: a SIDR REQ, from an RDMA_PS_UDP id (cm.h, "UD ids"): its ConnectBody's
// qp_num is 0 and its connection parameters unused; only a UDP listener takes it. The kAccept
// that answers it is the SIDR REP (qp_num: the passive side's UD QP), a kReject its refusal;
// either ends the exchange, and both sides close the connection.
inline constexpr uint16_t kFlagSidr = 16;

// The body of a kCompareSwap (host byte order: both ends are processes of one host).
struct AtomicOperands {
  uint64_t compare;
  uint64_t swap;
};

// One piece of the requester's memory, as an address in ITS address space.
struct CmaSegment {
  uint64_t addr;
  uint64_t length;
};

// The word whose address a side offers (ConnectBody / AcceptBody.probe_addr) so that the other
// side can find out whether it may reach this process's memory (ptrace rules may forbid it).
inline constexpr uint64_t kProbeMagic = 0x736f667472706d61ULL;

// The largest body a request or read response may carry (the largest RC message, nic/post.cc).
inline constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 31;

struct Header {
  uint32_t magic;
  uint16_t type;      // a Type
  uint16_t flags;     // kFlag*
  uint32_t body_len;  // bytes that follow the header
  uint32_t imm_data;  // network order, as the sender gave it
  uint64_t seq;       // requests: the requester's number; responses: the request's number
  uint64_t remote_addr;
  uint64_t length;  // kRead: the bytes wanted
  uint32_t rkey;
  int32_t status;  // responses: ibv_wc_status; kReject: the CM reject reason
};

// PRIVATE DATA. A CM body (ConnectBody, AcceptBody, RejectBody) ends with its private data,
// which may be as long as rdma_conn_param's uint8_t length allows (255 bytes: what iWARP's MPA
// request and reply carry; the IB CM's messages carry fewer, a limit the sender's profile
// enforces before anything is sent). The body goes without the unused tail of its array: its
// body_len is CmBodyBytes(body), from CmBodyMinBytes<Body>() (no private data) to sizeof(Body).
// A private_data_len above what the body_len holds is a protocol error (Validate*Body).
inline constexpr int kMaxPrivateData = 255;

// The connection parameters of ConnectBody and AcceptBody are the IB CM's REQ and REP fields,
// and have their widths: srq and flow_control 1 bit, the retry counts 3 bits (the sender cuts
// rdma_conn_param's to them, as the kernel's CMA does; a larger value is a hostile peer's).
inline constexpr uint8_t kMaxRetryCount = 7;

struct ConnectBody {
  uint32_t qp_num;
  uint8_t srq;
  uint8_t private_data_len;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  int32_t pid;          // the requester's process
  uint8_t flow_control;
  uint8_t retry_count;
  uint8_t rnr_retry_count;
  uint8_t reserved;
  uint64_t probe_addr;  // of a word holding kProbeMagic in the requester's memory
  sockaddr_storage src;  // the requester's address
  sockaddr_storage dst;  // the address it asked for
  uint8_t private_data[kMaxPrivateData];  // LAST: sent up to private_data_len
};

struct AcceptBody {
  uint32_t qp_num;
  uint8_t private_data_len;
  uint8_t responder_resources;
  uint8_t initiator_depth;
  uint8_t srq;
  int32_t pid;          // the accepting process
  uint8_t can_reach_you;  // 1: the passive side read the active side's probe word (kFlagCma ok)
  uint8_t flow_control;
  uint8_t rnr_retry_count;  // (a REP has no retry count)
  uint8_t reserved;
  uint64_t probe_addr;  // of a word holding kProbeMagic in the accepting process's memory
  uint8_t private_data[kMaxPrivateData];  // LAST: sent up to private_data_len
};

struct RejectBody {
  uint8_t private_data_len;
  uint8_t private_data[kMaxPrivateData];  // LAST: sent up to private_data_len
};

// The bytes of a CM body with no private data (the least body_len of its type).
template <typename Body>
constexpr uint32_t CmBodyMinBytes() {
  return static_cast<uint32_t>(offsetof(Body, private_data));
}
// The bytes of `body` sent: its fixed part and its private_data_len bytes of private data.
// REQUIRES: body.private_data_len <= kMaxPrivateData (always: a uint8_t).
template <typename Body>
uint32_t CmBodyBytes(const Body& body) {
  return CmBodyMinBytes<Body>() + body.private_data_len;
}
// Copies the `body_len` bytes at `bytes` (a validated header's CM body) into `*body`, zero past
// them. REQUIRES: body_len <= sizeof(Body).
template <typename Body>
void ReadCmBody(const uint8_t* bytes, uint32_t body_len, Body* body) {
  std::memset(body, 0, sizeof(*body));
  std::memcpy(body, bytes, body_len);
}

// kShmRing: a ring offered (switched 0: the dialer's, first message of a connection) or
// offered back (switched 1: the listener's answer, after which its messages are in its ring).
// The capacity is checked when the ring is mapped (shm::Ring::Attach).
// 2: the producer's words before the data (shm/ring.h), and the region table (with_table).
inline constexpr uint32_t kShmRingVersion = 2;
struct ShmRingBody {
  uint32_t version;  // kShmRingVersion
  uint32_t capacity_log2;
  uint8_t switched;
  // 1: the sender's region table (shm/region_table.h) is the second descriptor of the offer.
  uint8_t with_table;
  uint8_t reserved[6];
};

// kQpBind: who the requests that follow come from and which QP of the receiving process they
// are for (ibv_qp_attr.dest_qp_num of the sender's RTR), or (kUdBindQpNum, outside the 24 bits
// of a QP number) that UD datagrams follow.
inline constexpr uint32_t kQpBindVersion = 1;
inline constexpr uint32_t kUdBindQpNum = 1u << 24;

// The first bytes of a kUdSend's body: the datagram's header fields (DETH and GRH). The
// sending process is the connection's, as the kernel says; its QP number is its word.
struct UdSendPrefix {
  uint32_t src_qp_num;
  uint32_t dst_qp_num;
  uint32_t qkey;
  uint8_t hop_limit;
  uint8_t traffic_class;
  uint8_t reserved[2];  // 0
};
// The longest UD message: the largest path MTU (IBV_MTU_4096).
inline constexpr uint32_t kMaxUdMessage = 4096;
bool ValidateUdSendPrefix(const UdSendPrefix& prefix);
struct QpBindBody {
  uint32_t version;  // kQpBindVersion
  uint32_t src_qp_num;
  uint32_t dst_qp_num;
  int32_t pid;  // the sender's process
  uint8_t src_gid[16];
  uint8_t dst_gid[16];
};

// True when `header` is a message this version understands: a known type, only the flags that
// type may carry, and lengths that agree with the type (fixed for CM bodies, bounded for data;
// `length` zero where the type does not use it). Nothing else of the message is trusted yet.
bool ValidateHeader(const Header& header);

// ONE RULE FOR EVERY REQUEST: the bytes a request (a validated header) touches at the target,
// which are what the responder checks against the key: an atomic's 8, a read's `length`, a
// write's or send's data (its body, or under kFlagCma the `length` its segments describe).
// 0 for a message that is not a request.
uint64_t TargetBytes(const Header& header);

// True when `body` (a ConnectBody / AcceptBody / RejectBody read by ReadCmBody from a validated
// header's `body_len` bytes) has consistent fields: private_data_len within the body_len
// (a peer claiming more private data than it sent lies), addresses of a known family, the
// connection parameters within their IB CM fields (srq and flow_control 0 or 1, retry counts
// kMaxRetryCount at most).
bool ValidateConnectBody(const ConnectBody& body, uint32_t body_len);
bool ValidateAcceptBody(const AcceptBody& body, uint32_t body_len);
bool ValidateRejectBody(const RejectBody& body, uint32_t body_len);
bool ValidateQpBindBody(const QpBindBody& body);
bool ValidateShmRingBody(const ShmRingBody& body);

// A peer said something about itself that the kernel contradicts (`what`, e.g. "pid", as it
// claimed, against the kernel's SO_PEERCRED pid): the caller ends the connection; this says so
// on stderr, the first time in this process only (a hostile peer cannot flood the log).
void ReportPeerMismatch(const char* what, long claimed, long kernel_pid);

// A header of `type` with the magic set and everything else zero.
Header MakeHeader(Type type);

}  // namespace softrpma::sim::wire

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_WIRE_H_
