/*
 * thread_cpu.h - CPU time of this process and of each of its threads, read
 * by thread id through the kernel's per-thread CPU clocks (clock_gettime on
 * the clock id made from the tid: well under a microsecond, against several
 * microseconds to open and parse /proc/self/task/TID/stat).
 *
 * The thread set is enumerated from /proc/self/task only when it may have
 * changed: the task directory's link count moved, a thread's clock read
 * failed (it exited), or the process used noticeably more CPU than the known
 * threads account for (a thread came and went between two reads).
 *
 * Used by the CPU monitor thread only; not thread-safe, not for signal
 * handlers.
 */
#ifndef PERF_THREAD_CPU_H
#define PERF_THREAD_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/base/threads.h"

/* Process CPU time (all threads, user + system) in nanoseconds. */
int64_t perf__process_cpu_ns(void);

/* perf__thread_cpu_ns(tid): sdk/base/threads.h. */

typedef struct perf__thread_cpu_s {
  pid_t tid;
  int64_t cpu_ns;   /* at the last perf__thread_set_read */
  int64_t delta_ns; /* CPU used between the last two reads */
} perf__thread_cpu_t;

typedef struct perf__thread_set_s {
  perf__thread_cpu_t *threads; /* ascending tid */
  size_t count, cap;
  size_t max_threads;       /* bound given at init; more threads are not tracked */
  long nlink;               /* /proc/self/task link count at the last enumeration */
  int64_t process_cpu_ns;   /* process CPU at the last read */
  int64_t process_delta_ns; /* process CPU used between the last two reads */
  unsigned enumerations;    /* how often /proc/self/task was listed (for tests) */
} perf__thread_set_t;

/* Prepare an empty set tracking at most max_threads threads. */
void perf__thread_set_init(perf__thread_set_t *set, size_t max_threads);

/* Read every known thread's CPU time (and the process's), re-enumerating the
   threads first when the set may have changed (see above), and set each
   delta_ns. A thread that is new since the previous read used all of its
   CPU time since then, so its delta is its whole CPU time; on the first read
   every delta is 0. Returns 0 or a negative perf_error_t. */
int perf__thread_set_read(perf__thread_set_t *set);

/* Whether threads came or went since the last enumeration (the task
   directory's link count moved): one stat. false for NULL. */
bool perf__thread_set_moved(const perf__thread_set_t *set);

/* The entry for tid, or NULL. */
const perf__thread_cpu_t *perf__thread_set_find(const perf__thread_set_t *set, pid_t tid);

void perf__thread_set_free(perf__thread_set_t *set);

#endif
