// wire_test: what ValidateHeader and the body checks let through from an untrusted peer.

#include "simverbs/sim/fabric/wire.h"

#include <netinet/in.h>

#include <cstring>

#include "gtest/gtest.h"

namespace softrpma::sim::wire {
namespace {

TEST(ValidateHeader, AcceptsEachTypeWithItsBodyLength) {
  struct Case {
    Type type;
    uint32_t body_len;
  };
  for (const Case& c : {Case{Type::kConnectRequest, sizeof(ConnectBody)},
                        Case{Type::kAccept, sizeof(AcceptBody)},
                        Case{Type::kReject, sizeof(RejectBody)},
                        Case{Type::kQpBind, sizeof(QpBindBody)}, Case{Type::kReady, 0},
                        Case{Type::kDisconnect, 0}, Case{Type::kDisconnectReply, 0},
                        Case{Type::kRead, 0}, Case{Type::kAck, 0},
                        Case{Type::kAtomicWrite, 8},
                        Case{Type::kCompareSwap, sizeof(AtomicOperands)},
                        Case{Type::kFetchAdd, 8}, Case{Type::kWrite, 4096},
                        Case{Type::kSend, 0}, Case{Type::kReadResponse, 1 << 20},
                        Case{Type::kShmRing, sizeof(ShmRingBody)}, Case{Type::kShmSwitch, 0}}) {
    Header header = MakeHeader(c.type);
    header.body_len = c.body_len;
    EXPECT_TRUE(ValidateHeader(header)) << static_cast<int>(c.type);
  }
}

TEST(ValidateShmRingBody, NeedsTheVersionAndASwitchOfZeroOrOne) {
  ShmRingBody body;
  std::memset(&body, 0, sizeof(body));
  body.version = kShmRingVersion;
  EXPECT_TRUE(ValidateShmRingBody(body));
  body.switched = 1;
  EXPECT_TRUE(ValidateShmRingBody(body));
  body.switched = 2;
  EXPECT_FALSE(ValidateShmRingBody(body));
  body.switched = 0;
  body.version = kShmRingVersion + 1;
  EXPECT_FALSE(ValidateShmRingBody(body));
  Header header = MakeHeader(Type::kShmRing);
  header.body_len = sizeof(body) + 1;
  EXPECT_FALSE(ValidateHeader(header));
  header = MakeHeader(Type::kShmSwitch);
  header.body_len = 1;
  EXPECT_FALSE(ValidateHeader(header));
  header.body_len = 0;
  header.flags = kFlagCma;  // the carrier's messages carry no flag
  EXPECT_FALSE(ValidateHeader(header));
}

TEST(ValidateQpBindBody, NeedsTheVersionAndAQpNumber) {
  QpBindBody body;
  std::memset(&body, 0, sizeof(body));
  body.version = kQpBindVersion;
  body.dst_qp_num = 0x11;
  EXPECT_FALSE(ValidateQpBindBody(body));  // no sender's QP number
  body.src_qp_num = 1u << 24;
  EXPECT_FALSE(ValidateQpBindBody(body));
  body.src_qp_num = 0x11;
  EXPECT_TRUE(ValidateQpBindBody(body));
  body.version = kQpBindVersion + 1;
  EXPECT_FALSE(ValidateQpBindBody(body));
  body.version = kQpBindVersion;
  body.dst_qp_num = 0;
  EXPECT_FALSE(ValidateQpBindBody(body));
  body.dst_qp_num = (1u << 24) + 1;  // QP numbers are 24 bits
  EXPECT_FALSE(ValidateQpBindBody(body));
  body.dst_qp_num = kUdBindQpNum;  // the one above them: UD datagrams follow
  EXPECT_EQ(kUdBindQpNum, 1u << 24);
  EXPECT_TRUE(ValidateQpBindBody(body));
  Header header = MakeHeader(Type::kQpBind);
  header.body_len = sizeof(body) - 1;
  EXPECT_FALSE(ValidateHeader(header));
}

TEST(ValidateUdSend, APrefixAndAtMostOneLargestMtu_QpNumbersOf24Bits) {
  Header header = MakeHeader(Type::kUdSend);
  header.body_len = sizeof(UdSendPrefix) - 1;
  EXPECT_FALSE(ValidateHeader(header));  // not even the prefix
  header.body_len = sizeof(UdSendPrefix);
  EXPECT_TRUE(ValidateHeader(header));  // an empty message
  header.body_len = sizeof(UdSendPrefix) + kMaxUdMessage;
  EXPECT_TRUE(ValidateHeader(header));
  header.body_len = sizeof(UdSendPrefix) + kMaxUdMessage + 1;
  EXPECT_FALSE(ValidateHeader(header));  // above any path MTU
  header.body_len = sizeof(UdSendPrefix);
  header.length = 1;
  EXPECT_FALSE(ValidateHeader(header));  // `length` says nothing here
  header.length = 0;
  header.flags = kFlagImm | kFlagSolicited;
  EXPECT_TRUE(ValidateHeader(header));
  header.flags = kFlagCma;
  EXPECT_FALSE(ValidateHeader(header));  // no cross-memory attach: the data is the body

  UdSendPrefix prefix;
  std::memset(&prefix, 0, sizeof(prefix));
  prefix.src_qp_num = 0x12;
  prefix.dst_qp_num = 0x13;
  EXPECT_TRUE(ValidateUdSendPrefix(prefix));
  prefix.dst_qp_num = 1u << 24;
  EXPECT_FALSE(ValidateUdSendPrefix(prefix));
  prefix.dst_qp_num = 0x13;
  prefix.src_qp_num = 1u << 24;
  EXPECT_FALSE(ValidateUdSendPrefix(prefix));
  prefix.src_qp_num = 0x12;
  prefix.reserved[1] = 1;
  EXPECT_FALSE(ValidateUdSendPrefix(prefix));
}

TEST(ValidateHeader, RejectsBadMagicUnknownTypeAndWrongLengths) {
  Header header = MakeHeader(Type::kAck);
  header.magic = 0x12345678;
  EXPECT_FALSE(ValidateHeader(header));

  header = MakeHeader(Type::kAck);
  header.type = 99;
  EXPECT_FALSE(ValidateHeader(header));

  header = MakeHeader(Type::kAck);
  header.body_len = 1;  // an ack has no body
  EXPECT_FALSE(ValidateHeader(header));

  header = MakeHeader(Type::kAccept);
  header.body_len = sizeof(AcceptBody) + 1;
  EXPECT_FALSE(ValidateHeader(header));

  header = MakeHeader(Type::kAtomicWrite);
  header.body_len = 16;
  EXPECT_FALSE(ValidateHeader(header));

  // A compare-and-swap carries both operands, a fetch-and-add its addend, and nothing else.
  for (uint32_t body_len : {0u, 8u, 24u}) {
    header = MakeHeader(Type::kCompareSwap);
    header.body_len = body_len;
    EXPECT_FALSE(ValidateHeader(header)) << body_len;
  }
  for (uint32_t body_len : {0u, 16u}) {
    header = MakeHeader(Type::kFetchAdd);
    header.body_len = body_len;
    EXPECT_FALSE(ValidateHeader(header)) << body_len;
  }
  header = MakeHeader(Type::kFetchAdd);
  header.body_len = 8;
  header.flags = kFlagCma;  // never by cross-memory attach
  EXPECT_FALSE(ValidateHeader(header));
  header.flags = 0;
  header.length = 8;
  EXPECT_FALSE(ValidateHeader(header));

  header = MakeHeader(Type::kRead);
  header.length = kMaxMessageBytes + 1;
  EXPECT_FALSE(ValidateHeader(header));
}

TEST(ValidateBodies, RejectUnknownFamilies) {
  ConnectBody connect;
  std::memset(&connect, 0, sizeof(connect));
  connect.src.ss_family = AF_INET;
  connect.dst.ss_family = AF_INET6;
  EXPECT_TRUE(ValidateConnectBody(connect, sizeof(connect)));
  connect.dst.ss_family = AF_UNIX;
  EXPECT_FALSE(ValidateConnectBody(connect, sizeof(connect)));
}

// A CM body is sent up to its private data: a REQ, REP or REJ of every length from none to
// kMaxPrivateData (iWARP's 255) is valid, and a private_data_len above what the body_len
// holds is a peer's lie.
TEST(ValidateBodies, PrivateDataUpToWhatTheBodyHolds) {
  ConnectBody connect;
  std::memset(&connect, 0, sizeof(connect));
  connect.src.ss_family = AF_INET;
  connect.dst.ss_family = AF_INET;
  AcceptBody accept;
  std::memset(&accept, 0, sizeof(accept));
  RejectBody reject;
  std::memset(&reject, 0, sizeof(reject));
  for (int len : {0, 56, 196, 200, kMaxPrivateData}) {
    connect.private_data_len = accept.private_data_len = reject.private_data_len =
        static_cast<uint8_t>(len);
    EXPECT_TRUE(ValidateConnectBody(connect, CmBodyBytes(connect))) << len;
    EXPECT_TRUE(ValidateAcceptBody(accept, CmBodyBytes(accept))) << len;
    EXPECT_TRUE(ValidateRejectBody(reject, CmBodyBytes(reject))) << len;
    EXPECT_TRUE(ValidateConnectBody(connect, sizeof(connect))) << len;  // a longer body: fine
    if (len == 0) continue;
    EXPECT_FALSE(ValidateConnectBody(connect, CmBodyBytes(connect) - 1)) << len;
    EXPECT_FALSE(ValidateAcceptBody(accept, CmBodyBytes(accept) - 1)) << len;
    EXPECT_FALSE(ValidateRejectBody(reject, CmBodyBytes(reject) - 1)) << len;
  }
  EXPECT_EQ(CmBodyBytes(reject), sizeof(RejectBody));  // 255 fills the array exactly
}

// The header admits a CM body from its fixed part (no private data) to its whole size.
TEST(ValidateHeader, CmBodiesFromTheirFixedPartToTheirWholeSize) {
  struct Case {
    Type type;
    uint32_t min_len;
    uint32_t max_len;
  };
  for (const Case& c :
       {Case{Type::kConnectRequest, CmBodyMinBytes<ConnectBody>(), sizeof(ConnectBody)},
        Case{Type::kAccept, CmBodyMinBytes<AcceptBody>(), sizeof(AcceptBody)},
        Case{Type::kReject, CmBodyMinBytes<RejectBody>(), sizeof(RejectBody)}}) {
    Header header = MakeHeader(c.type);
    header.body_len = c.min_len;
    EXPECT_TRUE(ValidateHeader(header)) << static_cast<int>(c.type);
    header.body_len = c.max_len;
    EXPECT_TRUE(ValidateHeader(header)) << static_cast<int>(c.type);
    header.body_len = c.min_len - 1;
    EXPECT_FALSE(ValidateHeader(header)) << static_cast<int>(c.type);
    header.body_len = c.max_len + 1;
    EXPECT_FALSE(ValidateHeader(header)) << static_cast<int>(c.type);
  }
  EXPECT_EQ(sizeof(RejectBody), 1u + kMaxPrivateData);
}

// The connection parameters are the IB CM's REQ / REP fields, of their widths: each one past
// its width is refused (a hostile peer's), each at its widest is a body like any other.
TEST(ValidateBodies, RejectConnParamsWiderThanTheirIbCmFields) {
  struct Case {
    const char* field;
    uint8_t ConnectBody::*connect;
    uint8_t AcceptBody::*accept;  // nullptr: not in a REP
    uint8_t widest;
  };
  for (const Case& c : {Case{"srq", &ConnectBody::srq, &AcceptBody::srq, 1},
                        Case{"flow_control", &ConnectBody::flow_control, &AcceptBody::flow_control,
                             1},
                        Case{"retry_count", &ConnectBody::retry_count, nullptr, kMaxRetryCount},
                        Case{"rnr_retry_count", &ConnectBody::rnr_retry_count,
                             &AcceptBody::rnr_retry_count, kMaxRetryCount}}) {
    SCOPED_TRACE(c.field);
    ConnectBody connect;
    std::memset(&connect, 0, sizeof(connect));
    connect.src.ss_family = AF_INET;
    connect.dst.ss_family = AF_INET;
    AcceptBody accept;
    std::memset(&accept, 0, sizeof(accept));
    for (const uint8_t value : {c.widest, static_cast<uint8_t>(c.widest + 1), uint8_t{255}}) {
      const bool fits = value <= c.widest;
      connect.*c.connect = value;
      EXPECT_EQ(ValidateConnectBody(connect, sizeof(connect)), fits) << "REQ " << int{value};
      if (c.accept == nullptr) continue;
      accept.*c.accept = value;
      EXPECT_EQ(ValidateAcceptBody(accept, sizeof(accept)), fits) << "REP " << int{value};
    }
  }
}

// Issue 18, attack 0: an atomic flagged for cross-memory attach with length 0 once skipped the
// key check and stored its word wherever remote_addr named. A flag that does not belong to the
// type, or a length the type does not use, makes the message malformed.
TEST(ValidateHeader, RejectsFlagsAndLengthsThatDoNotBelongToTheType) {
  Header header = MakeHeader(Type::kAtomicWrite);
  header.body_len = 8;
  EXPECT_TRUE(ValidateHeader(header));
  header.flags = kFlagCma;
  EXPECT_FALSE(ValidateHeader(header));
  header.flags = kFlagImm;
  EXPECT_FALSE(ValidateHeader(header));
  header.flags = 0;
  header.length = 8;  // an atomic's bytes are its body
  EXPECT_FALSE(ValidateHeader(header));

  header = MakeHeader(Type::kWrite);
  header.body_len = 64;
  header.length = 64;  // a write that carries its data has no length of its own
  EXPECT_FALSE(ValidateHeader(header));
  header.length = 0;
  header.flags = kFlagImm | kFlagSolicited;
  EXPECT_TRUE(ValidateHeader(header));
  header.flags = 0x80;  // no such flag
  EXPECT_FALSE(ValidateHeader(header));

  header = MakeHeader(Type::kRead);
  header.length = 64;
  header.flags = kFlagImm;  // a read has no immediate data
  EXPECT_FALSE(ValidateHeader(header));

  for (Type type : {Type::kAck, Type::kDisconnect, Type::kDisconnectReply}) {
    header = MakeHeader(type);
    header.flags = kFlagCma;
    EXPECT_FALSE(ValidateHeader(header)) << static_cast<int>(type);
  }
  header = MakeHeader(Type::kConnectRequest);
  header.body_len = sizeof(ConnectBody);
  header.flags = kFlagCma;
  EXPECT_FALSE(ValidateHeader(header));

  // A fault's broken exchange is a flag of a REJ or a DREQ, and only of those.
  header = MakeHeader(Type::kReject);
  header.body_len = sizeof(RejectBody);
  header.flags = kFlagBroken;
  EXPECT_TRUE(ValidateHeader(header));
  header.flags = kFlagBroken | kFlagCma;
  EXPECT_FALSE(ValidateHeader(header));
  header = MakeHeader(Type::kDisconnect);
  header.flags = kFlagBroken;
  EXPECT_TRUE(ValidateHeader(header));
  for (Type type : {Type::kAccept, Type::kDisconnectReply, Type::kReady, Type::kAck}) {
    header = MakeHeader(type);
    header.body_len = type == Type::kAccept ? sizeof(AcceptBody) : 0;
    header.flags = kFlagBroken;
    EXPECT_FALSE(ValidateHeader(header)) << static_cast<int>(type);
  }
}

TEST(TargetBytes, IsWhatTheOperationTouchesAtTheTarget) {
  Header atomic = MakeHeader(Type::kAtomicWrite);
  atomic.body_len = 8;
  EXPECT_EQ(TargetBytes(atomic), 8u);
  Header compare_swap = MakeHeader(Type::kCompareSwap);
  compare_swap.body_len = sizeof(AtomicOperands);
  EXPECT_EQ(TargetBytes(compare_swap), 8u);  // its body is 16 bytes; the target word is 8
  Header fetch_add = MakeHeader(Type::kFetchAdd);
  fetch_add.body_len = 8;
  EXPECT_EQ(TargetBytes(fetch_add), 8u);
  Header read = MakeHeader(Type::kRead);
  read.length = 4096;
  EXPECT_EQ(TargetBytes(read), 4096u);
  Header write = MakeHeader(Type::kWrite);
  write.body_len = 100;
  EXPECT_EQ(TargetBytes(write), 100u);
  write.flags = kFlagCma;
  write.body_len = sizeof(CmaSegment);
  write.length = 1 << 20;
  EXPECT_EQ(TargetBytes(write), uint64_t{1} << 20);
  EXPECT_EQ(TargetBytes(MakeHeader(Type::kAck)), 0u);
}

}  // namespace
}  // namespace softrpma::sim::wire
