/*
 * sampler.h - the internal capture entry point behind perf_backtrace_* and
 * the monitors: interrupt thread `tid` with the sampler's signal and collect
 * its stack. Implemented per platform (sdk/platform/linux/signal_sampler.c).
 */
#ifndef PERF_SAMPLER_H
#define PERF_SAMPLER_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/sampler/modules.h"

/* Deepest stack one capture records; deeper stacks are truncated. */
#define PERF__MAX_FRAMES 1024

/* Capture tid's stack (0 = the caller) into pcs[0..max), innermost first,
   unwinding with the rules of snapshot `mods` (the caller holds a reference
   and uses the same snapshot to name the frames). Returns 0,
   PERF_E_TRUNCATED (max frames written), or a negative perf_error_t. */
int perf__sampler_capture(perf__modules_t *mods, pid_t tid, uintptr_t *pcs, size_t max,
                          size_t *count);

/* TSC ticks the signal handler spent on the last successful capture (for
   benchmarks: the time the target thread was kept from its own work). */
uint64_t perf__sampler_last_handler_cycles(void);

#endif
