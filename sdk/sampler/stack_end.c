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
  *end = PERF__STACK_END_UNSPECIFIED;
  if (err != PERF_OK && err != PERF_E_TRUNCATED) return err;
  switch (status) {
  case PERF__WALK_COMPLETE: *end = PERF__STACK_END_COMPLETE; break;
  case PERF__WALK_RULES_PENDING: /* rules that could not be compiled: none */
  case PERF__WALK_NO_RULE: *end = PERF__STACK_END_NO_RULE; break;
  case PERF__WALK_BAD_READ: *end = PERF__STACK_END_BAD_READ; break;
  case PERF__WALK_NOT_ASCENDING: *end = PERF__STACK_END_NOT_ASCENDING; break;
  case PERF__WALK_DEPTH: *end = PERF__STACK_END_DEPTH; break;
  }
  if (err == PERF_E_TRUNCATED) *end = PERF__STACK_END_DEPTH;
  return err;
}
