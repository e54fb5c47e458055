/*
 * stack_bounds.h - where each thread's stack is: the readable mapping that
 * holds its sp, cached per thread id. Misses are answered from one snapshot
 * of /proc/self/maps (sorted, binary-searched), read again only when an sp
 * lies in no mapping it knows: capturing 2,000 new threads reads the file
 * once, not 2,000 times. Holds at most PERF__STACK_BOUNDS_MAX threads (past
 * that, a miss is looked up each time). Callers serialise (the sampler's
 * lock); never the signal handler.
 */
#ifndef PERF_SAMPLER_STACK_BOUNDS_H
#define PERF_SAMPLER_STACK_BOUNDS_H

#include <stdint.h>
#include <sys/types.h>

#define PERF__STACK_BOUNDS_MAX 65536

typedef struct perf__stack_bounds_s {
  pid_t tid;
  uintptr_t lo, hi;       /* the mapping [lo, hi) holding the thread's sp */
  int64_t blocked_cpu_ns; /* > 0: its CPU time when last seen blocked (signal_sampler.c) */
} perf__stack_bounds_t;

/* The cached bounds of tid, if their mapping is still mapped whole (a thread
   id can be reused by a thread whose stack lies elsewhere); NULL if not
   known. Valid until the next call of this module. */
perf__stack_bounds_t *perf__stack_bounds_find(pid_t tid);

/* Learn tid's bounds from its sp. Returns 0 and *out, PERF_E_SYSTEM (no
   readable mapping holds sp), PERF_E_UNSUPPORTED (/proc/self/maps cannot
   be read: logged once with its reason) or PERF_E_NO_MEMORY. */
int perf__stack_bounds_learn(pid_t tid, uintptr_t sp, perf__stack_bounds_t **out);

/* Drop tid (gone). */
void perf__stack_bounds_forget(pid_t tid);

/* Drop everything (a forked child: its threads have new ids). */
void perf__stack_bounds_reset(void);

#endif
