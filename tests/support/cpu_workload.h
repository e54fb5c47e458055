/*
 * cpu_workload.h - the CPU workload of known split that
 * tests/monitors/test_cpu_profile.c checks the CPU monitor's profile against
 * and bench/cpu_profile_bench.c compares with `perf record` on:
 *  - a cycle thread spending 7 ms of CPU in phase_seventy, then 3 ms in
 *    phase_thirty, over and over (its CPU per phase summed in
 *    cpu_workload_seventy_ns / _thirty_ns);
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

/* Set to make every workload thread (and stop_at_burst-like bodies that
   watch it) return. */
extern atomic_int cpu_workload_stop_flag;
extern atomic_llong cpu_workload_seventy_ns, cpu_workload_thirty_ns;

unsigned long phase_seventy(void);
unsigned long phase_thirty(void);
unsigned long idle_work(void); /* ~60 us of CPU */
void idle_wait(void);          /* 1 ms in nanosleep */

/* A thread and its kernel id (known once cpu_worker_start returns). */
typedef struct cpu_worker_s {
  pthread_t thread;
  _Atomic pid_t tid;
  void *(*body)(void *);
} cpu_worker_t;

/* Start body (called with NULL) in w's thread and wait until its tid is known. */
void cpu_worker_start(cpu_worker_t *w, void *(*body)(void *));
/* w's thread's CPU time so far (its CPU clock), ns. */
int64_t cpu_worker_cpu_ns(const cpu_worker_t *w);

/* The whole workload: the idle threads, then the cycle thread. */
typedef struct cpu_workload_s {
  cpu_worker_t cycle, idle[CPU_WORKLOAD_IDLE];
} cpu_workload_t;
void cpu_workload_start(cpu_workload_t *w);
/* Set cpu_workload_stop_flag and join every thread. */
void cpu_workload_stop(cpu_workload_t *w);

#endif
