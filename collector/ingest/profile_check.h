/*
 * profile_check.h - the always-on CPU profile's events (EVENT_KIND_PROFILE)
 * checked before a batch is stored: a profile window carries its samples
 * aggregated in stack_counts (samples, weight_micros, state per stack,
 * thread and state), never as per-sample arrays. Ingest, on its threads.
 */
#ifndef PERF_COLLECTOR_PROFILE_CHECK_H
#define PERF_COLLECTOR_PROFILE_CHECK_H

#include <stddef.h>

#include "perf/v1/perf.pb-c.h"

/* A stack count's CPU time is at most this (about 71 minutes): a window
   is a minute, so anything above is garbage, and sums over many windows
   stay far inside an int64. */
#define PROFILE_WEIGHT_MAX_MICROS UINT32_MAX

/* 0 when every profile event of bt can be stored: no per-sample array
   (sample_offsets_micros, sample_stacks, sample_tids, sample_errors,
   sample_weights_micros, sample_states, sample_syscalls, sample_fds),
   each stack count's state a SampleState and its weight_micros at most
   PROFILE_WEIGHT_MAX_MICROS. Else -1 with msg (cap bytes) naming the
   event and the field. Other kinds are not looked at: their counts'
   weight_micros and state are not read. */
int profile_check(const Perf__V1__Batch *bt, char *msg, size_t cap);

#endif
