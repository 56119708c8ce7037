#include "simverbs/sim/fabric/shm/ring.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace softrpma::sim::shm {
namespace {

constexpr int kLog2 = Ring::kMinCapacityLog2;  // 4 KiB
constexpr size_t kCapacity = size_t{1} << kLog2;

// A producer's ring and the consumer's view of the same memfd (as two processes map it).
struct Pair {
  std::unique_ptr<Ring> producer;
  std::unique_ptr<Ring> consumer;
  int fd = -1;
  ~Pair() {
    if (fd >= 0) close(fd);
  }
};

void MakePair(Pair& pair) {
  pair.producer = Ring::Create(kLog2, &pair.fd);
  EXPECT_NE(pair.producer, nullptr) << std::strerror(errno);
  if (pair.producer != nullptr) pair.consumer = Ring::Attach(pair.fd, kLog2);
  EXPECT_NE(pair.consumer, nullptr);
}

ssize_t WriteBytes(Ring* ring, const void* data, size_t length) {
  iovec iov{const_cast<void*>(data), length};
  return ring->Write(&iov, 1, 0);
}

// The shared counters, as a hostile peer sees them: at the start of the mapping.
struct Counters {
  alignas(64) std::atomic<uint64_t> head;
  alignas(64) std::atomic<uint64_t> tail;
};
Counters* MapCounters(int fd) {
  void* map = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  EXPECT_NE(map, MAP_FAILED);
  return static_cast<Counters*>(map);
}

TEST(RingTest, BytesArriveInOrderAcrossTheWrap) {
  Pair pair;
  MakePair(pair);
  ASSERT_NE(pair.consumer, nullptr);
  std::vector<uint8_t> sent(3000), got(3000);
  uint8_t next = 0;
  for (int round = 0; round < 10; ++round) {  // 30,000 bytes through 4 KiB: wraps many times
    for (uint8_t& byte : sent) byte = next++;
    ASSERT_EQ(WriteBytes(pair.producer.get(), sent.data(), sent.size()), 3000);
    EXPECT_FALSE(pair.consumer->Empty());
    ASSERT_EQ(pair.consumer->Read(got.data(), got.size()), 3000);
    EXPECT_EQ(got, sent);
    EXPECT_TRUE(pair.consumer->Empty());
  }
}

TEST(RingTest, WriteTakesWhatFitsAndSkipsWhatWasSent) {
  Pair pair;
  MakePair(pair);
  ASSERT_NE(pair.consumer, nullptr);
  std::vector<uint8_t> first(kCapacity - 10, 1), second(100, 2);
  iovec iov[2] = {{first.data(), first.size()}, {second.data(), second.size()}};
  ASSERT_EQ(pair.producer->Write(iov, 2, 0), static_cast<ssize_t>(kCapacity));  // 10 of second
  EXPECT_EQ(pair.producer->Write(iov, 2, kCapacity), 0);  // full
  std::vector<uint8_t> got(kCapacity);
  ASSERT_EQ(pair.consumer->Read(got.data(), got.size()), static_cast<ssize_t>(kCapacity));
  EXPECT_EQ(got[kCapacity - 11], 1);
  EXPECT_EQ(got[kCapacity - 10], 2);
  ASSERT_EQ(pair.producer->Write(iov, 2, kCapacity), 90);  // the rest of `second`
  EXPECT_EQ(pair.consumer->Read(got.data(), got.size()), 90);
}

TEST(RingTest, ABellOnlyForAnArmedConsumerAndOnlyOnce) {
  Pair pair;
  MakePair(pair);
  ASSERT_NE(pair.consumer, nullptr);
  uint8_t byte = 7;
  ASSERT_EQ(WriteBytes(pair.producer.get(), &byte, 1), 1);
  EXPECT_FALSE(pair.producer->TakeBellRequest()) << "a polling consumer needs no bell";
  EXPECT_FALSE(pair.consumer->Arm()) << "a byte is there: read it, do not sleep";
  ASSERT_EQ(pair.consumer->Read(&byte, 1), 1);
  EXPECT_TRUE(pair.consumer->Arm());
  ASSERT_EQ(WriteBytes(pair.producer.get(), &byte, 1), 1);
  EXPECT_TRUE(pair.producer->TakeBellRequest());
  EXPECT_FALSE(pair.producer->TakeBellRequest()) << "one bell per arming";
}

TEST(RingTest, AFullProducerIsRungWhenRoomIsMade) {
  Pair pair;
  MakePair(pair);
  ASSERT_NE(pair.consumer, nullptr);
  std::vector<uint8_t> bytes(kCapacity, 3);
  ASSERT_EQ(WriteBytes(pair.producer.get(), bytes.data(), bytes.size()),
            static_cast<ssize_t>(kCapacity));
  EXPECT_FALSE(pair.producer->WaitForRoom()) << "full: wait for the bell";
  ASSERT_EQ(pair.consumer->Read(bytes.data(), 1), 1);
  EXPECT_TRUE(pair.consumer->TakeRoomRequest());
  EXPECT_FALSE(pair.consumer->TakeRoomRequest());
  EXPECT_TRUE(pair.producer->WaitForRoom()) << "room already: no bell will come";
}

TEST(RingTest, AConsumerRefusesAHeadBeyondTheRing) {
  Pair pair;
  MakePair(pair);
  ASSERT_NE(pair.consumer, nullptr);
  Counters* counters = MapCounters(pair.fd);
  counters->head.store(kCapacity + 1);  // more bytes than the ring holds
  uint8_t byte;
  EXPECT_EQ(pair.consumer->Read(&byte, 1), -1);
  counters->head.store(~uint64_t{0});  // "before" the consumer's tail
  EXPECT_EQ(pair.consumer->Read(&byte, 1), -1);
  munmap(counters, 4096);
}

TEST(RingTest, AProducerRefusesATailThatGoesBackOrPassesTheHead) {
  Pair pair;
  MakePair(pair);
  ASSERT_NE(pair.consumer, nullptr);
  Counters* counters = MapCounters(pair.fd);
  uint8_t bytes[64] = {};
  ASSERT_EQ(WriteBytes(pair.producer.get(), bytes, 64), 64);
  ASSERT_EQ(pair.consumer->Read(bytes, 32), 32);
  ASSERT_EQ(WriteBytes(pair.producer.get(), bytes, 1), 1);  // sees tail 32
  counters->tail.store(65 + 1);                             // past the head (65)
  EXPECT_EQ(WriteBytes(pair.producer.get(), bytes, 1), -1);
  counters->tail.store(10);  // back from 32
  EXPECT_EQ(WriteBytes(pair.producer.get(), bytes, 1), -1);
  munmap(counters, 4096);
}

TEST(RingTest, AttachRefusesWhatIsNotASealedRingOfItsSize) {
  int fd = -1;
  std::unique_ptr<Ring> ring = Ring::Create(kLog2, &fd);
  ASSERT_NE(ring, nullptr);
  EXPECT_EQ(Ring::Attach(fd, kLog2 + 1), nullptr) << "announced bigger than it is";
  EXPECT_EQ(Ring::Attach(fd, Ring::kMinCapacityLog2 - 1), nullptr);
  EXPECT_EQ(Ring::Attach(fd, Ring::kMaxCapacityLog2 + 1), nullptr);
  EXPECT_EQ(ftruncate(fd, 64), -1) << "sealed against shrinking";
  close(fd);

  // A memfd without seals: the peer could truncate it under the mapping (SIGBUS).
  const int unsealed = memfd_create("test", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 512 + kCapacity), 0);
  EXPECT_EQ(Ring::Attach(unsealed, kLog2), nullptr);
  close(unsealed);

  // Sealed against writes: cannot be a ring (refused when mapped, never at a store later).
  const int readonly = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(readonly, 0);
  ASSERT_EQ(ftruncate(readonly, 512 + kCapacity), 0);
  ASSERT_EQ(fcntl(readonly, F_ADD_SEALS,
                  F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL), 0);
  EXPECT_EQ(Ring::Attach(readonly, kLog2), nullptr);
  close(readonly);

  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_EQ(Ring::Attach(pipe_fds[0], kLog2), nullptr);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// Two processes: the child produces a counted stream through a small ring, the parent reads
// and checks every byte (a busy pair: neither ever arms, so no bell is needed).
TEST(RingTest, TwoProcessesStreamThroughOneRing) {
  Pair pair;
  MakePair(pair);
  ASSERT_NE(pair.consumer, nullptr);
  constexpr size_t kTotal = size_t{4} << 20;
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // pair.producer's mapping is MAP_SHARED: the child writes the parent's memory.
    uint8_t chunk[1000];
    uint64_t sent = 0;
    while (sent < kTotal) {
      const size_t n = std::min<size_t>(sizeof(chunk), kTotal - sent);
      for (size_t i = 0; i < n; ++i) chunk[i] = static_cast<uint8_t>((sent + i) * 7);
      size_t done = 0;
      while (done < n) {
        iovec iov{chunk, n};
        const ssize_t w = pair.producer->Write(&iov, 1, done);
        if (w < 0) _exit(2);
        done += static_cast<size_t>(w);
      }
      sent += n;
    }
    _exit(0);
  }
  std::vector<uint8_t> got(1500);
  uint64_t received = 0;
  bool good = true;
  while (received < kTotal && good) {
    const ssize_t n = pair.consumer->Read(got.data(), got.size());
    ASSERT_GE(n, 0);
    for (ssize_t i = 0; i < n; ++i) {
      good = good && got[i] == static_cast<uint8_t>((received + i) * 7);
    }
    received += static_cast<uint64_t>(n);
  }
  EXPECT_TRUE(good) << "a byte differs near " << received;
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace softrpma::sim::shm
