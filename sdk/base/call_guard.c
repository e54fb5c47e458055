/*
 * call_guard.c - the per-thread "inside an SDK call" mark (see
 * call_guard.h). Runs on app threads and in their signal handlers.
 *
 * initial-exec TLS: the word lives in the static TLS block, so touching it
 * never calls __tls_get_addr (which may allocate, and must not from a
 * signal handler). A signal between the check and the store in
 * perf__call_enter runs its whole call and clears the mark before this one
 * continues, so the pair needs no atomics; the compiler barrier keeps the
 * store before the call's first lock.
 */
#include "sdk/base/call_guard.h"

static _Thread_local int t_depth __attribute__((tls_model("initial-exec")));

bool perf__call_enter(void) {
  if (t_depth) return false;
  t_depth = 1;
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  return true;
}

void perf__call_leave(void) {
  __atomic_signal_fence(__ATOMIC_SEQ_CST);
  t_depth = 0;
}

bool perf__call_active(void) {
  return t_depth != 0;
}
