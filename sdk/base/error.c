/*
 * error.c - the error enum's text and the SDK's one deallocator.
 */
#include <stdlib.h>

#include "perf_sdk.h"

const char *perf_strerror(int err) {
  switch (err) {
  case PERF_OK: return "success";
  case PERF_E_INVALID_ARGUMENT: return "invalid argument";
  case PERF_E_NO_MEMORY: return "out of memory or over a size bound";
  case PERF_E_NO_THREAD: return "no such thread in this process";
  case PERF_E_TIMEOUT:
    return "the thread did not answer in time (signal blocked, D state or stopped)";
  case PERF_E_BUSY: return "a capture of that thread is already in flight";
  case PERF_E_SIGNAL: return "no usable sampling signal (none free, or taken by another handler)";
  case PERF_E_SYSTEM: return "a system call failed";
  case PERF_E_TRUNCATED: return "the stack was deeper than the output buffer";
  case PERF_E_INVALID_CONFIG: return "invalid configuration";
  case PERF_E_ALREADY_INITIALIZED: return "already initialized";
  case PERF_E_NOT_INITIALIZED: return "not initialized";
  case PERF_E_UNSUPPORTED: return "not supported here";
  }
  return "unknown error";
}

void perf_free(void *p) {
  free(p);
}
