/*
 * error.c - the error enum's text and the SDK's one deallocator.
 */
#include <stdlib.h>

#include "perf_sdk.h"

const char *perf_strerror(int err) {
  switch (err) {
  case PERF_OK: return "success";
  case PERF_E_INVALID_ARGUMENT:
    return "invalid argument (a NULL pointer, a value out of range), or a nested loop ended "
           "without its begin";
  case PERF_E_NO_MEMORY: return "out of memory or over a size bound";
  case PERF_E_NO_THREAD: return "no such thread in this process";
  case PERF_E_TIMEOUT:
    return "the thread did not answer the sampler in time (it blocks the sampler's signal, got "
           "no CPU within the timeout, or kept waking and blocking)";
  case PERF_E_BUSY:
    return "busy: the sampler is already capturing that thread or cannot send another request "
           "now, or an SDK call is already in progress on this thread (a CPU profile's sample: "
           "taken before its thread's stack or unwind rules were learned, with the sample ring "
           "full, or of a thread past the profile's bound)";
  case PERF_E_SIGNAL:
    return "no usable sampling signal (none free, the configured one is taken, or the app "
           "replaced the sampler's handler)";
  case PERF_E_SYSTEM: return "a system call (or libdwfl) failed or answered unexpectedly";
  case PERF_E_TRUNCATED: return "the stack was deeper than the output buffer";
  case PERF_E_INVALID_CONFIG: return "invalid configuration (the log names the field)";
  case PERF_E_ALREADY_INITIALIZED:
    return "already initialized (the SDK is running, or the sampler's signal or stack copy size "
           "is fixed by its first use)";
  case PERF_E_NOT_INITIALIZED: return "not initialized (perf_sdk_init first, or after shutdown)";
  case PERF_E_UNSUPPORTED:
    return "not available here: the SDK's core library, or what the feature needs, could not be "
           "loaded or set up (the log says which)";
  case PERF_E_RATE_LIMITED:
    return "over max_events_per_hour: the event was dropped (events_dropped_rate)";
  case PERF_E_QUEUE_FULL:
    return "the event queue is full (queue_capacity): the event was dropped "
           "(events_dropped_queue)";
  case PERF_E_DEADLINE:
    return "the timeout ran out first (a flush's rest is written and sent later, a shutdown "
           "leaves a busy SDK thread running)";
  case PERF_E_SINK_FAILED:
    return "recorded events were lost: a batch could not be put into the spool, or the spool "
           "could not be opened (the log says why)";
  }
  return "unknown error";
}

void perf_free(void *p) {
  free(p);
}
