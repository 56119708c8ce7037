// bytes.h: Bytes, a byte buffer whose new bytes are left as they are instead of zeroed, for the
// buffers the fabric fills before anything reads them (a cross-memory copy's destination, a
// message body as it arrives): zeroing a 1 MiB buffer costs a third of copying into it.

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_BYTES_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_BYTES_H_

#include <cstdint>
#include <memory>
#include <new>
#include <utility>
#include <vector>

namespace softrpma::sim {

// std::allocator, but a value-initialization (vector::resize, vector(n)) is a
// default-initialization: for uint8_t, no write at all.
template <typename T>
struct DefaultInitAllocator : std::allocator<T> {
  template <typename U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  DefaultInitAllocator() = default;
  template <typename U>
  DefaultInitAllocator(const DefaultInitAllocator<U>&) noexcept {}
  template <typename U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

using Bytes = std::vector<uint8_t, DefaultInitAllocator<uint8_t>>;

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_BYTES_H_
