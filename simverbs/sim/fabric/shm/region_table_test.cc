#include "simverbs/sim/fabric/shm/region_table.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "gtest/gtest.h"

namespace softrpma::sim::shm {
namespace {

using Region = RegionTable::Region;

int MineFd() {
  int fd = -1;
  EXPECT_NE(RegionTable::Mine(&fd), nullptr);
  return fd;
}

TEST(RegionTableTest, APeerFindsWhatIsPublishedInsideItsRangeOnly) {
  RegionTable* mine = RegionTable::Mine();
  ASSERT_NE(mine, nullptr);
  std::unique_ptr<RegionTable> view = RegionTable::Attach(MineFd());
  ASSERT_NE(view, nullptr);
  ASSERT_TRUE(mine->Publish(Region{0x1234, 7, 0x10000, 4096}));
  Region found;
  ASSERT_TRUE(view->Lookup(0x1234, 0x10000, 4096, &found));
  EXPECT_EQ(found.domain, 7u);
  EXPECT_EQ(found.addr, 0x10000u);
  EXPECT_EQ(found.length, 4096u);
  EXPECT_TRUE(view->Lookup(0x1234, 0x10ff8, 8, &found));
  EXPECT_FALSE(view->Lookup(0x1234, 0x10ff9, 8, &found)) << "one byte past its end";
  EXPECT_FALSE(view->Lookup(0x1234, 0xfff8, 16, &found)) << "starts before it";
  EXPECT_FALSE(view->Lookup(0x1234, 0x10000, ~uint64_t{0}, &found)) << "an overflowing length";
  EXPECT_FALSE(view->Lookup(0x1234, ~uint64_t{0} - 2, 8, &found)) << "an overflowing end";
  EXPECT_FALSE(view->Lookup(0x1234 + RegionTable::kSlots, 0x10000, 8, &found))
      << "another key of the same slot";
  EXPECT_FALSE(view->Lookup(0, 0x10000, 8, &found));

  // A region of another domain with the same key stays when that one's withdrawal is asked.
  mine->Withdraw(0x1234, 8);
  EXPECT_TRUE(view->Lookup(0x1234, 0x10000, 8, &found));
  mine->Withdraw(0x1234, 7);
  EXPECT_FALSE(view->Lookup(0x1234, 0x10000, 8, &found)) << "withdrawn";
  // Its slot is free again.
  ASSERT_TRUE(mine->Publish(Region{0x1234 + RegionTable::kSlots, 9, 0x20000, 64}));
  EXPECT_TRUE(view->Lookup(0x1234 + RegionTable::kSlots, 0x20000, 64, &found));
  mine->Withdraw(0x1234 + RegionTable::kSlots, 9);
}

TEST(RegionTableTest, ATakenSlotRefusesASecondRegion) {
  RegionTable* mine = RegionTable::Mine();
  ASSERT_NE(mine, nullptr);
  ASSERT_TRUE(mine->Publish(Region{0x40, 1, 0x1000, 64}));
  EXPECT_FALSE(mine->Publish(Region{0x40 + RegionTable::kSlots, 1, 0x2000, 64}));
  EXPECT_FALSE(mine->Publish(Region{0, 1, 0x2000, 64})) << "key 0 is no key";
  EXPECT_FALSE(mine->Publish(Region{0x41, 1, 0x2000, 0})) << "an empty region";
  mine->Withdraw(0x40, 1);
}

// The peer's view cannot change the table: the memfd is sealed against every writable mapping
// but its owner's, and against write(2); it cannot be shrunk under the owner either.
TEST(RegionTableTest, APeerCannotWriteTheTable) {
  const int fd = MineFd();
  ASSERT_GE(fd, 0);
  // A peer gets the descriptor over SCM_RIGHTS, the same open file: a dup is the same here.
  const int peer = dup(fd);
  ASSERT_GE(peer, 0);
  EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, peer, 0), MAP_FAILED);
  EXPECT_EQ(errno, EPERM);
  const char byte = 1;
  EXPECT_EQ(pwrite(peer, &byte, 1, 0), -1);
  EXPECT_EQ(ftruncate(peer, 0), -1);
  void* read_only = mmap(nullptr, 4096, PROT_READ, MAP_SHARED, peer, 0);
  ASSERT_NE(read_only, MAP_FAILED);
  EXPECT_NE(mprotect(read_only, 4096, PROT_READ | PROT_WRITE), 0);
  munmap(read_only, 4096);
  close(peer);
}

TEST(RegionTableTest, AttachRefusesWhatIsNotASealedTable) {
  const int unsealed = memfd_create("test", MFD_CLOEXEC);
  ASSERT_GE(unsealed, 0);
  ASSERT_EQ(ftruncate(unsealed, 64 * RegionTable::kSlots), 0);
  EXPECT_EQ(RegionTable::Attach(unsealed), nullptr) << "could be truncated under the mapping";
  close(unsealed);

  const int small = memfd_create("test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  ASSERT_GE(small, 0);
  ASSERT_EQ(ftruncate(small, 4096), 0);
  ASSERT_EQ(fcntl(small, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
  EXPECT_EQ(RegionTable::Attach(small), nullptr) << "smaller than a table";
  close(small);

  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  EXPECT_EQ(RegionTable::Attach(pipe_fds[0]), nullptr);
  close(pipe_fds[0]);
  close(pipe_fds[1]);
}

// A reader racing the owner's changes of one slot never finds a mix of two regions: each
// success is one of the regions published, whole.
TEST(RegionTableTest, AReaderNeverSeesATornRegion) {
  RegionTable* mine = RegionTable::Mine();
  ASSERT_NE(mine, nullptr);
  std::unique_ptr<RegionTable> view = RegionTable::Attach(MineFd());
  ASSERT_NE(view, nullptr);
  constexpr uint32_t kKey = 0x777;
  constexpr uint64_t kAddr = 0x100000;
  std::atomic<bool> stop{false};
  std::thread owner([&] {
    for (uint64_t i = 1; !stop.load(); ++i) {
      // Each region's length says its domain: a mix of two would not.
      ASSERT_TRUE(mine->Publish(Region{kKey, i, kAddr, i * 64}));
      mine->Withdraw(kKey, i);
    }
  });
  uint64_t hits = 0;
  for (int n = 0; n < 20000000 && hits < 10000; ++n) {
    Region found;
    if (view->Lookup(kKey, kAddr, 1, &found)) {
      ++hits;
      ASSERT_EQ(found.addr, kAddr);
      ASSERT_EQ(found.length, found.domain * 64);
    }
  }
  EXPECT_GT(hits, 0u);
  stop.store(true);
  owner.join();
}

// A fork child's table is its own: what it publishes is not in its parent's.
TEST(RegionTableTest, AForkChildPublishesInATableOfItsOwn) {
  RegionTable* mine = RegionTable::Mine();
  ASSERT_NE(mine, nullptr);
  std::unique_ptr<RegionTable> view = RegionTable::Attach(MineFd());
  ASSERT_NE(view, nullptr);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    RegionTable* own = RegionTable::Mine();
    const bool ok = own != nullptr && own != mine && own->Publish(Region{0x99, 1, 0x1000, 64});
    _exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
  Region found;
  EXPECT_FALSE(view->Lookup(0x99, 0x1000, 64, &found)) << "the child wrote its parent's table";
}

}  // namespace
}  // namespace softrpma::sim::shm
