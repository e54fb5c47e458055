/*
 * call_guard.h - the per-thread mark "this thread is inside an SDK call".
 * A public function that takes a lock or allocates sets it on entry and
 * clears it on return; a second such call on the same thread while it is
 * set can only come from a signal handler that interrupted the first (or
 * from the app's log callback), and gets PERF_E_BUSY at once instead of
 * deadlocking on a lock (or on malloc's) that its own thread holds.
 *
 * Any thread, including a signal handler: the mark is one thread-local
 * word in static TLS (no allocation on first touch).
 */
#ifndef PERF_CALL_GUARD_H
#define PERF_CALL_GUARD_H

#include <stdbool.h>

/* Enter an SDK call on this thread: false when one is already in progress
   here (then do nothing and return PERF_E_BUSY), true otherwise (then call
   perf__call_leave before returning). */
bool perf__call_enter(void);
void perf__call_leave(void);

/* An SDK call is in progress on this thread. */
bool perf__call_active(void);

#endif
