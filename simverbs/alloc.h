// alloc.h: the one place where softrpma allocates the objects it hands to users.
//
// The API layer and the simulated NIC allocate through New<T>() / Delete(), never plain `new`,
// so that a test or a fault plan can make any single allocation fail (the "malloc" fault point
// of the simulator) and every RPMA_E_NOMEM path can be reached. Without a hook installed an
// allocation fails only when the system is out of memory.
//
// Thread-safe.

#ifndef SOFTRPMA_SIMVERBS_ALLOC_H_
#define SOFTRPMA_SIMVERBS_ALLOC_H_

#include <atomic>
#include <new>
#include <utility>

namespace softrpma {

// Called before every allocation; returning true makes that allocation fail.
using AllocFailHook = bool (*)();

// Installs `hook` (nullptr removes it). The previous hook is returned.
AllocFailHook SetAllocFailHook(AllocFailHook hook);

// True when the installed hook says the next allocation must fail.
bool AllocShouldFail();

// A new T built from args, or nullptr when out of memory (real or injected).
template <typename T, typename... Args>
T* New(Args&&... args) {
  if (AllocShouldFail()) return nullptr;
  return new (std::nothrow) T(std::forward<Args>(args)...);
}

template <typename T>
void Delete(T* object) {
  delete object;
}

}  // namespace softrpma

#endif  // SOFTRPMA_SIMVERBS_ALLOC_H_
