/*
 * sampler.h - the internal capture entry point behind perf_backtrace_* and
 * the monitors: collect thread `tid`'s stack, by interrupting it with the
 * sampler's signal when it runs, or from /proc and a copy of its stack
 * when it is blocked (never signalled then). Implemented in
 * signal_sampler.c.
 */
#ifndef PERF_SAMPLER_H
#define PERF_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/sampler/modules.h"
#include "sdk/sampler/unwind_rules.h"

/* Deepest stack one capture records; deeper stacks are truncated. */
#define PERF__MAX_FRAMES 1024

/* Capture tid's stack (0 = the caller) into pcs[0..max), innermost first,
   unwinding with the rules of snapshot `mods` (the caller holds a reference
   and uses the same snapshot to name the frames). Returns 0,
   PERF_E_TRUNCATED (max frames written), or a negative perf_error_t. */
int perf__sampler_capture(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                          size_t *count);

/* The same capture, also saying how the walk ended (when it returns 0 or
   PERF_E_TRUNCATED): PERF__WALK_COMPLETE when the stack reached its
   outermost frame, else why frames beyond the last one are missing
   (unwind_rules.h; PERF__WALK_DEPTH goes with PERF_E_TRUNCATED). In
   PERF_UNWIND_STACK_COPY mode libdwfl tells less: COMPLETE, DEPTH,
   NOT_ASCENDING, or BAD_READ for any other stop (usually the copy's end). */
int perf__sampler_capture_status(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                                 size_t *count, perf__walk_status_t *status);

/* TSC ticks the signal handler spent on the last successful capture (for
   benchmarks: the time the target thread was kept from its own work). */
uint64_t perf__sampler_last_handler_cycles(void);

#endif
