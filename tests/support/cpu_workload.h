/*
 * cpu_workload.h - the CPU workload of known split that
 * tests/monitors/test_cpu_profile.c checks the CPU monitor's profile against
 * and bench/cpu_profile_bench.c compares with `perf record` on:
 *  - one or more (up to CPU_WORKLOAD_MAX_HOT) cycle threads, each spending
 *    7 ms of CPU in phase_seventy, then 3 ms in phase_thirty, over and over
 *    (the CPU per phase summed over them in cpu_workload_seventy_ns /
 *    _thirty_ns, and per thread in its cpu_worker_t);
 *  - CPU_WORKLOAD_IDLE nearly idle threads waking every millisecond to burn
 *    ~60 us in idle_work, waiting in idle_wait (nanosleep) otherwise.
 * The profiles look for these functions by name: never inlined or merged.
 * Link cpu_workload.c; build it like the program's own chains (-O2
 * -fno-optimize-sibling-calls).
 */
#ifndef PERF_TEST_CPU_WORKLOAD_H
#define PERF_TEST_CPU_WORKLOAD_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#define CPU_WORKLOAD_IDLE 3
#define CPU_WORKLOAD_MAX_HOT 8

/* Set to make every workload thread (and stop_at_burst-like bodies that
   watch it) return. */
extern atomic_int cpu_workload_stop_flag;
extern atomic_llong cpu_workload_seventy_ns, cpu_workload_thirty_ns;

unsigned long phase_seventy(void);
unsigned long phase_thirty(void);
unsigned long idle_work(void); /* ~60 us of CPU */
void idle_wait(void);          /* 1 ms in nanosleep */

/* A thread and its kernel id (known once cpu_worker_start returns); a
   cycle thread's CPU in each phase. */
typedef struct cpu_worker_s {
  pthread_t thread;
  _Atomic pid_t tid;
  void *(*body)(void *);
  atomic_llong seventy_ns, thirty_ns;
} cpu_worker_t;

/* Start body (called with w) in w's thread and wait until its tid is known. */
void cpu_worker_start(cpu_worker_t *w, void *(*body)(void *));
/* w's thread's CPU time so far (its CPU clock), ns. */
int64_t cpu_worker_cpu_ns(const cpu_worker_t *w);

/* The whole workload: the idle threads, then the cycle threads. */
typedef struct cpu_workload_s {
  cpu_worker_t cycle[CPU_WORKLOAD_MAX_HOT], idle[CPU_WORKLOAD_IDLE];
  int hot; /* cycle threads started */
} cpu_workload_t;
/* One cycle thread. */
void cpu_workload_start(cpu_workload_t *w);
/* hot (1..CPU_WORKLOAD_MAX_HOT) cycle threads. */
void cpu_workload_start_hot(cpu_workload_t *w, int hot);
/* Set cpu_workload_stop_flag and join every thread. */
void cpu_workload_stop(cpu_workload_t *w);

#endif
