#include "simverbs/sim/fabric/wire.h"

#include <netinet/in.h>

#include <atomic>
#include <cstdio>
#include <cstring>

namespace softrpma::sim::wire {
namespace {

bool KnownFamily(const sockaddr_storage& addr) {
  return addr.ss_family == AF_INET || addr.ss_family == AF_INET6;
}

// The IB CM fields a REQ and a REP share, within their widths.
template <typename Body>
bool ValidConnParam(const Body& body) {
  return body.srq <= 1 && body.flow_control <= 1 && body.rnr_retry_count <= kMaxRetryCount;
}

// A CM body's length: its fixed part, and at most kMaxPrivateData bytes of private data.
template <typename Body>
bool CmBodyLength(const Header& header) {
  return header.body_len >= CmBodyMinBytes<Body>() && header.body_len <= sizeof(Body);
}

// The private data a CM body claims is within the body_len bytes that came.
template <typename Body>
bool PrivateDataWithin(const Body& body, uint32_t body_len) {
  return body_len >= CmBodyMinBytes<Body>() && body_len <= sizeof(Body) &&
         body.private_data_len <= body_len - CmBodyMinBytes<Body>();
}

// A body of 1 to kMaxCmaSegments CmaSegments (their sum is checked against header.length by
// the responder, which reads them).
bool ValidCmaBody(const Header& header) {
  return header.body_len > 0 && header.body_len % sizeof(CmaSegment) == 0 &&
         header.body_len / sizeof(CmaSegment) <= kMaxCmaSegments;
}

// The flags each type may carry: one that does not belong to the type makes the message
// malformed (a cross-memory-attach flag on an atomic once made the responder skip its key
// check).
uint16_t AllowedFlags(Type type) {
  switch (type) {
    case Type::kWrite:
    case Type::kSend:
      return kFlagImm | kFlagSolicited | kFlagCma;
    case Type::kRead:
      return kFlagSolicited | kFlagCma;
    case Type::kAtomicWrite:
    case Type::kCompareSwap:
    case Type::kFetchAdd:
      return kFlagSolicited;
    case Type::kReadResponse:
    case Type::kReady:
      return kFlagCma;
    case Type::kConnectRequest:
      return kFlagSidr;
    case Type::kReject:
    case Type::kDisconnect:
      return kFlagBroken;
    case Type::kUdSend:
      return kFlagImm | kFlagSolicited;
    default:
      return 0;
  }
}

}  // namespace

bool ValidateHeader(const Header& header) {
  if (header.magic != kMagic) return false;
  const Type type = static_cast<Type>(header.type);
  if ((header.flags & ~AllowedFlags(type)) != 0) return false;
  const bool cma = (header.flags & kFlagCma) != 0;
  switch (type) {
    case Type::kConnectRequest:
      return CmBodyLength<ConnectBody>(header);
    case Type::kAccept:
      return CmBodyLength<AcceptBody>(header);
    case Type::kReject:
      return CmBodyLength<RejectBody>(header);
    case Type::kQpBind:
      return header.body_len == sizeof(QpBindBody);
    case Type::kShmRing:
      return header.body_len == sizeof(ShmRingBody);
    case Type::kReady:
    case Type::kDisconnect:
    case Type::kDisconnectReply:
    case Type::kAck:
    case Type::kShmSwitch:
      return header.body_len == 0;
    case Type::kAtomicWrite:
      // Its 8 bytes are the body; `length` is not the operation's and must say nothing.
      return header.body_len == sizeof(uint64_t) && header.length == 0;
    case Type::kCompareSwap:
      return header.body_len == sizeof(AtomicOperands) && header.length == 0;
    case Type::kFetchAdd:
      return header.body_len == sizeof(uint64_t) && header.length == 0;
    case Type::kRead:
      if (header.length > kMaxMessageBytes) return false;
      return cma ? ValidCmaBody(header) : header.body_len == 0;
    case Type::kWrite:
    case Type::kSend:
      // The data is the body, or (cross-memory attach) `length` bytes the segments describe.
      if (cma) return header.length <= kMaxMessageBytes && ValidCmaBody(header);
      return header.length == 0 && header.body_len <= kMaxMessageBytes;
    case Type::kReadResponse:
      return cma ? header.body_len == 0 : header.body_len <= kMaxMessageBytes;
    case Type::kUdSend:
      return header.length == 0 && header.body_len >= sizeof(UdSendPrefix) &&
             header.body_len <= sizeof(UdSendPrefix) + kMaxUdMessage;
  }
  return false;
}

uint64_t TargetBytes(const Header& header) {
  switch (static_cast<Type>(header.type)) {
    case Type::kAtomicWrite:
    case Type::kCompareSwap:
    case Type::kFetchAdd:
      return sizeof(uint64_t);
    case Type::kRead:
      return header.length;
    case Type::kWrite:
    case Type::kSend:
      return (header.flags & kFlagCma) != 0 ? header.length : header.body_len;
    default:
      return 0;
  }
}

bool ValidateConnectBody(const ConnectBody& body, uint32_t body_len) {
  return PrivateDataWithin(body, body_len) && ValidConnParam(body) &&
         body.retry_count <= kMaxRetryCount && KnownFamily(body.src) && KnownFamily(body.dst);
}

bool ValidateAcceptBody(const AcceptBody& body, uint32_t body_len) {
  return PrivateDataWithin(body, body_len) && ValidConnParam(body);
}

bool ValidateRejectBody(const RejectBody& body, uint32_t body_len) {
  return PrivateDataWithin(body, body_len);
}

bool ValidateQpBindBody(const QpBindBody& body) {
  return body.version == kQpBindVersion && body.dst_qp_num != 0 &&
         (body.dst_qp_num < (1u << 24) || body.dst_qp_num == kUdBindQpNum) &&
         body.src_qp_num != 0 && body.src_qp_num < (1u << 24);
}

bool ValidateUdSendPrefix(const UdSendPrefix& prefix) {
  return prefix.src_qp_num < (1u << 24) && prefix.dst_qp_num < (1u << 24) &&
         prefix.reserved[0] == 0 && prefix.reserved[1] == 0;
}

bool ValidateShmRingBody(const ShmRingBody& body) {
  return body.version == kShmRingVersion && body.switched <= 1 && body.with_table <= 1;
}

void ReportPeerMismatch(const char* what, long claimed, long kernel_pid) {
  static std::atomic<bool> reported{false};
  if (reported.exchange(true)) return;
  std::fprintf(stderr,
               "softrpma: fabric: a peer process (pid %ld, as the kernel says) claimed %s %ld; "
               "its connection is ended (later ones are not reported)\n",
               kernel_pid, what, claimed);
}

Header MakeHeader(Type type) {
  Header header;
  std::memset(&header, 0, sizeof(header));
  header.magic = kMagic;
  header.type = static_cast<uint16_t>(type);
  return header;
}

}  // namespace softrpma::sim::wire
