/*
 * stack_end.h - how a captured stack ended: whether the walk reached the
 * thread's outermost frame or stopped early, and why. Carried with every
 * stack (events, the wire's Stack.end, the text form's `<truncated: ..>`
 * line). Any thread but the signal handler.
 */
#ifndef PERF_SAMPLER_STACK_END_H
#define PERF_SAMPLER_STACK_END_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/sampler/modules.h"
#include "sdk/sampler/unwind_rules.h"

/* The values of perf.v1 StackEnd (proto/perf/v1/perf.proto). */
typedef enum perf__stack_end_e {
  PERF__STACK_END_UNSPECIFIED = 0,   /* not known (a stack from an older SDK) */
  PERF__STACK_END_COMPLETE = 1,      /* the outermost frame was reached */
  PERF__STACK_END_DEPTH = 2,         /* the depth cap: deeper frames left out */
  PERF__STACK_END_NO_RULE = 3,       /* no unwind rule and no usable frame pointer */
  PERF__STACK_END_BAD_READ = 4,      /* a rule pointed outside the thread's stack */
  PERF__STACK_END_NOT_ASCENDING = 5, /* a frame did not move up the stack */
} perf__stack_end_t;

#define PERF__STACK_END_MAX PERF__STACK_END_NOT_ASCENDING

/* "complete", "depth", "no rule", "bad read", "not ascending";
   "unspecified" for anything else. */
const char *perf__stack_end_name(perf__stack_end_t end);

/* Whether a stack that ended so lacks frames: the text form then ends it
   with `<truncated: name>` (neither COMPLETE nor UNSPECIFIED). */
static inline int perf__stack_end_truncated(perf__stack_end_t end) {
  return end != PERF__STACK_END_COMPLETE && end != PERF__STACK_END_UNSPECIFIED;
}

/*
 * perf__sampler_capture that also says how the stack ended: the walk's
 * status (perf__walk_status_t, unwind_rules.h) as a stack end; a failed
 * capture (neither 0 nor PERF_E_TRUNCATED) ends UNSPECIFIED. Every caller
 * that makes stacks for reports goes through here.
 */
int perf__sampler_capture_with_end(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                                   size_t *count, perf__stack_end_t *end);

/* How a capture that returned `err` with walk status `status` ended (as
   perf__sampler_capture_with_end says it): for a snapshot's shots. */
perf__stack_end_t perf__stack_end_of(int err, perf__walk_status_t status);

#endif
