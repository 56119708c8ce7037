// torn_word_reader.h: a thread that reads one 8-byte word over and over while a test stores
// two patterns into it through the NIC (an atomic write), and notes any value that is
// neither: a torn store. For the atomic-write tests of the simulator and of librpma.
//
// Thread-safety: Start, then the test's stores from any thread, then Stop; the counters are
// read after Stop.

#ifndef SOFTRPMA_SIMVERBS_SIM_NIC_TORN_WORD_READER_H_
#define SOFTRPMA_SIMVERBS_SIM_NIC_TORN_WORD_READER_H_

#include <atomic>
#include <cstdint>
#include <thread>

namespace softrpma::sim::testing {

class TornWordReader final {
 public:
  // Two patterns that differ in every byte: any mix of the two is neither.
  static constexpr uint64_t kPatterns[2] = {0x0123456789ABCDEFULL, 0xFEDCBA9876543210ULL};

  // Stores kPatterns[0] into *target (8-byte aligned) and starts reading it.
  explicit TornWordReader(uint64_t* target) : target_(target) {
    __atomic_store_n(target_, kPatterns[0], __ATOMIC_SEQ_CST);
    reader_ = std::thread([this] {
      do {
        const uint64_t seen = __atomic_load_n(target_, __ATOMIC_SEQ_CST);
        if (seen != kPatterns[0] && seen != kPatterns[1]) torn_.store(seen);
        reads_.fetch_add(1, std::memory_order_relaxed);
      } while (!done_.load());
    });
  }
  TornWordReader(const TornWordReader&) = delete;
  TornWordReader& operator=(const TornWordReader&) = delete;
  ~TornWordReader() { Stop(); }

  // The pattern the i-th store writes (they alternate, starting with kPatterns[1]).
  static uint64_t Pattern(int i) { return kPatterns[(i + 1) % 2]; }

  void Stop() {
    done_.store(true);
    if (reader_.joinable()) reader_.join();
  }
  // A value seen that was neither pattern, or 0.
  uint64_t torn() const { return torn_.load(); }
  uint64_t reads() const { return reads_.load(); }
  uint64_t now() const { return __atomic_load_n(target_, __ATOMIC_SEQ_CST); }

 private:
  uint64_t* const target_;
  std::atomic<bool> done_{false};
  std::atomic<uint64_t> torn_{0};
  std::atomic<uint64_t> reads_{0};
  std::thread reader_;
};

}  // namespace softrpma::sim::testing

#endif  // SOFTRPMA_SIMVERBS_SIM_NIC_TORN_WORD_READER_H_
