/*
 * stack_end.c - names of stack ends, and the capture that reports one (see
 * stack_end.h). Runs on the capturing thread.
 */
#include "sdk/sampler/stack_end.h"

#include "perf_sdk.h"
#include "sdk/base/frame_text.h"
#include "sdk/sampler/sampler.h"

const char *perf__stack_end_name(perf__stack_end_t end) {
  return perf__stack_end_text((int)end);
}

int perf__sampler_capture_with_end(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                                   size_t *count, perf__stack_end_t *end) {
  int err = perf__sampler_capture(mods, tid, pcs, max, count);
  *end = err == PERF_OK            ? PERF__STACK_END_COMPLETE
         : err == PERF_E_TRUNCATED ? PERF__STACK_END_DEPTH
                                   : PERF__STACK_END_UNSPECIFIED;
  return err;
}
