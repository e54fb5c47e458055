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
  perf__walk_status_t status = PERF__WALK_NO_RULE;
  int err = perf__sampler_capture_status(mods, tid, pcs, max, count, &status);
  *end = perf__stack_end_of(err, status);
  return err;
}

perf__stack_end_t perf__stack_end_of(int err, perf__walk_status_t status) {
  if (err == PERF_E_TRUNCATED) return PERF__STACK_END_DEPTH;
  if (err != PERF_OK) return PERF__STACK_END_UNSPECIFIED;
  switch (status) {
  case PERF__WALK_COMPLETE: return PERF__STACK_END_COMPLETE;
  case PERF__WALK_RULES_PENDING: /* rules that could not be compiled: none */
  case PERF__WALK_NO_RULE: return PERF__STACK_END_NO_RULE;
  case PERF__WALK_BAD_READ: return PERF__STACK_END_BAD_READ;
  case PERF__WALK_NOT_ASCENDING: return PERF__STACK_END_NOT_ASCENDING;
  case PERF__WALK_DEPTH: return PERF__STACK_END_DEPTH;
  }
  return PERF__STACK_END_UNSPECIFIED;
}
