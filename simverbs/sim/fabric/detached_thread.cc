#include "simverbs/sim/fabric/detached_thread.h"

#include <pthread.h>
#include <signal.h>

#include "simverbs/sim/waits.h"

namespace softrpma::sim {

namespace {

struct Start {
  void* (*run)(void*);
  void* arg;
};

// On the board while it runs (waits.h): a thread of the simulator's, not of the program's.
void* RunOnBoard(void* start_arg) {
  const Start start = *static_cast<Start*>(start_arg);
  delete static_cast<Start*>(start_arg);
  waits::AddSimThread();
  void* result = start.run(start.arg);
  waits::RemoveSimThread();
  return result;
}

}  // namespace

int StartDetachedThread(void* (*run)(void*), void* arg) {
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &previous);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_t thread;
  Start* start = new Start{run, arg};
  const int err = pthread_create(&thread, &attr, &RunOnBoard, start);
  if (err != 0) delete start;
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
  return err;
}

}  // namespace softrpma::sim
