#include "simverbs/sim/fabric/detached_thread.h"

#include <pthread.h>
#include <signal.h>

namespace softrpma::sim {

int StartDetachedThread(void* (*run)(void*), void* arg) {
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  const int err = pthread_create(&thread, &attr, run, arg);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return err;
}

}  // namespace softrpma::sim
