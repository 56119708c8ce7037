// detached_thread.h: the fabric's own threads (the fabric thread, the copy pool's workers and
// watchdog) are started here: detached, and taking no signals.
//
// What it is: one pthread_create with every signal blocked around it, so the new thread
// inherits a full mask: the application's signal handlers run on the application's threads,
// never on a thread the simulator started behind its back. What it is not: a thread pool or a
// lifetime (the callers own their threads' state and their stopping).

#ifndef SOFTRPMA_SIMVERBS_SIM_FABRIC_DETACHED_THREAD_H_
#define SOFTRPMA_SIMVERBS_SIM_FABRIC_DETACHED_THREAD_H_

namespace softrpma::sim {

// Starts run(arg) on a detached thread that takes no signals. The caller's signal mask is the
// same on return. Returns 0, or the errno of pthread_create(3) (nothing started). Thread-safe.
int StartDetachedThread(void* (*run)(void*), void* arg);

}  // namespace softrpma::sim

#endif  // SOFTRPMA_SIMVERBS_SIM_FABRIC_DETACHED_THREAD_H_
