#include "simverbs/sim/fabric/wire.h"

#include <netinet/in.h>

#include <cstring>

namespace softrpma::sim::wire {
namespace {

bool KnownFamily(const sockaddr_storage& addr) {
  return addr.ss_family == AF_INET || addr.ss_family == AF_INET6;
}

// A body of 1 to kMaxCmaSegments CmaSegments (their sum is checked against header.length by
// the responder, which reads them).
bool ValidCmaBody(const Header& header) {
  return header.body_len > 0 && header.body_len % sizeof(CmaSegment) == 0 &&
         header.body_len / sizeof(CmaSegment) <= kMaxCmaSegments;
}

}  // namespace

bool ValidateHeader(const Header& header) {
  if (header.magic != kMagic) return false;
  switch (static_cast<Type>(header.type)) {
    case Type::kConnectRequest:
      return header.body_len == sizeof(ConnectBody);
    case Type::kAccept:
      return header.body_len == sizeof(AcceptBody);
    case Type::kReject:
      return header.body_len == sizeof(RejectBody);
    case Type::kQpBind:
      return header.body_len == sizeof(QpBindBody);
    case Type::kReady:
    case Type::kDisconnect:
    case Type::kDisconnectReply:
    case Type::kAck:
      return header.body_len == 0;
    case Type::kAtomicWrite:
      return header.body_len == sizeof(uint64_t);
    case Type::kRead:
      if (header.length > kMaxMessageBytes) return false;
      return (header.flags & kFlagCma) != 0 ? ValidCmaBody(header) : header.body_len == 0;
    case Type::kWrite:
    case Type::kSend:
      if ((header.flags & kFlagCma) != 0) {
        return header.length <= kMaxMessageBytes && ValidCmaBody(header);
      }
      return header.body_len <= kMaxMessageBytes;
    case Type::kReadResponse:
      return (header.flags & kFlagCma) != 0 ? header.body_len == 0
                                             : header.body_len <= kMaxMessageBytes;
  }
  return false;
}

bool ValidateConnectBody(const ConnectBody& body) {
  return body.private_data_len <= kMaxConnectPrivateData && KnownFamily(body.src) &&
         KnownFamily(body.dst);
}

bool ValidateAcceptBody(const AcceptBody& body) {
  return body.private_data_len <= kMaxAcceptPrivateData;
}

bool ValidateRejectBody(const RejectBody& body) {
  return body.private_data_len <= kMaxRejectPrivateData;
}

bool ValidateQpBindBody(const QpBindBody& body) {
  return body.version == kQpBindVersion && body.dst_qp_num != 0 && body.dst_qp_num < (1u << 24) &&
         body.src_qp_num != 0 && body.src_qp_num < (1u << 24);
}

Header MakeHeader(Type type) {
  Header header;
  std::memset(&header, 0, sizeof(header));
  header.magic = kMagic;
  header.type = static_cast<uint16_t>(type);
  return header;
}

}  // namespace softrpma::sim::wire
