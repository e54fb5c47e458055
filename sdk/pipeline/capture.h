/*
 * capture.h - take one sample of a thread into an event: the sampler's
 * capture with the event's module snapshot, recorded as a stack or as a
 * failed sample, and counted. Runs on the monitor threads and the
 * perf_sdk_capture_now caller.
 */
#ifndef PERF_CAPTURE_H
#define PERF_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/base/stats.h"
#include "sdk/pipeline/event.h"

/* 0, or PERF_E_NO_MEMORY when the event could not hold the sample. A failed
   capture is not an error here: it is recorded in the event. */
int perf__capture_sample(perf__event_t *ev, pid_t tid, perf__stats_t *stats);

/* Like perf__capture_sample, but the sample is kept only if still_valid(arg)
   holds once the capture is done: a hang's sample requested while the unit
   of work was running but taken after it ended is not part of the hang. */
int perf__capture_sample_checked(perf__event_t *ev, pid_t tid, perf__stats_t *stats,
                                 bool (*still_valid)(void *), void *arg);

/* One sample of each of n threads (none of them the caller) as snapshots
   of PERF__SAMPLER_IN_FLIGHT_MAX threads (sdk/sampler/sampler.h): every
   running thread of a snapshot is signalled before the first answer is
   awaited, so their samples lie about one round trip apart. Each sample
   carries the time its stack was read. 0 or PERF_E_NO_MEMORY. */
int perf__capture_samples(perf__event_t *ev, const pid_t *tids, size_t n, perf__stats_t *stats);

/* CPU samples of a weighted event: one capture of each of n threads, as
   perf__capture_samples. A thread found running (the sampler signalled it:
   on a CPU or runnable) is recorded as a sample standing for weights_ns[i]
   of its CPU time, and on_cpu[i] is set; a thread found blocked (read from
   /proc, never signalled) is not recorded at all: where a thread waits is
   not where it spends CPU. A failed capture is recorded as failed (no
   weight). *off_cpu counts the threads found blocked. 0 or
   PERF_E_NO_MEMORY. */
int perf__capture_cpu_samples(perf__event_t *ev, const pid_t *tids, const uint64_t *weights_ns,
                              size_t n, bool *on_cpu, size_t *off_cpu, perf__stats_t *stats);

/* The calling thread's own stack, starting at the frame that `caller_ra`
   (the SDK entry point's __builtin_return_address(0)) returns into: the
   SDK's own frames are left out. */
int perf__capture_self(perf__event_t *ev, uintptr_t caller_ra, perf__stats_t *stats);

/* Capture thread tid once and keep nothing (no event, no counter): what a
   thread's first capture pays once (the sampler learning its stack bounds
   and opening its /proc files, libdw loaded, the unwind rules of every
   module its stack crosses compiled: tens of milliseconds, more under a
   sanitizer) is paid now, on the calling thread, so that the samples that
   matter later cost what every capture costs. */
void perf__capture_prepare(pid_t tid);

#endif
