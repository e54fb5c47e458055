/*
 * cpu_timer_burst.h - a CPU burst's profile sampled by the hot threads'
 * own CPU-clock timers (sdk/sampler/cpu_timers.h), where the kernel allows
 * it: each thread gets samples in proportion to the CPU it burns, the
 * monitor only drains them. Runs on the CPU monitor's thread.
 */
#ifndef PERF_CPU_TIMER_BURST_H
#define PERF_CPU_TIMER_BURST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/base/stats.h"
#include "sdk/base/worker.h"
#include "sdk/monitors/thread_cpu.h"
#include "sdk/pipeline/event.h"

/* Whether bursts are sampled by CPU-clock timers on this system
   (perf__cpu_timers_supported). */
bool perf__cpu_timer_burst_enabled(void);

/* Sample the k threads tids[] (hottest first; their CPU clocks when the
   burst began in start_cpu_ns[], the CPU time each is expected to burn
   over the burst in expect_cpu_ns[]) until end_ns (monotonic), until none
   of them ran for quiet_ns, or until the worker is asked to stop, with
   timers of 1/hz of each thread's CPU time (shorter for a thread expected
   to burn too little for a few dozen samples), into the weighted event ev:
   each thread's CPU time over the burst is shared equally among its
   samples. set (NULL: none), read last when the burst began, is read
   again when threads come and go and every 200 ms: a thread started since
   that runs (never an SDK thread) is sampled too, named in the event with
   its share, and so is a thread that was there but not sampled and
   burned a period of CPU between two reads (its CPU since the read before
   shared among its samples, as a new thread's since its start), while the
   burst samples fewer than `places` threads (at most
   PERF__CPU_TIMERS_MAX). Samples not taken (a full ring; a period of CPU
   of a thread started past the bound) are counted in stats->samples_failed
   and in the event's failed samples. Returns the samples taken, or -1 when
   no timer could be armed (nothing was sampled: the caller samples the
   burst the requester's way). */
long perf__cpu_timer_burst(perf__worker_t *worker, perf__stats_t *stats, perf__event_t *ev,
                           perf__thread_set_t *set, size_t places, const pid_t *tids,
                           const int64_t *start_cpu_ns, const int64_t *expect_cpu_ns, size_t k,
                           unsigned hz, int64_t end_ns, int64_t quiet_ns);

#endif
