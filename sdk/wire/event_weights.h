/*
 * event_weights.h - a decoded CPU event's CPU time per stack count: the
 * sum of the weights (Event.sample_weights_micros) of the samples that had
 * the count's stack on the count's thread. For the readers of batches (the
 * collector's ingest, perf-dump); pure, any thread.
 */
#ifndef PERF_WIRE_EVENT_WEIGHTS_H
#define PERF_WIRE_EVENT_WEIGHTS_H

#include <stdint.h>

#include "perf/v1/perf.pb-c.h"

/* Each sample's weight is capped here (about 71 minutes of CPU), so a
   stack's sum over the most samples an event may hold fits an int64. */
#define PERF__CPU_WEIGHT_MAX_MICROS UINT32_MAX

/* out[i] (one per pe->stack_counts[i]): the CPU microseconds of that
   count's samples, or -1 for every count when the event carries no
   weights (then its samples count 1 each). The event passed the decoder's
   checks (weights: none or one per sample). 0, or -1 when memory ran out. */
int perf__event_cpu_us(const Perf__V1__Event *pe, int64_t *out);

#endif
