/*
 * loop_stats.h - the watched loops' statistics of one batch period, as
 * the hang monitor hands them to the recorder and the writer puts them
 * into the open batch: the wire's LoopStats (perf__batch_loop_stats_t,
 * sdk/wire/batch.h), named here for the monitors, which sit after the
 * pipeline and do not include the wire themselves.
 */
#ifndef PERF_PIPELINE_LOOP_STATS_H
#define PERF_PIPELINE_LOOP_STATS_H

#include <stdint.h>

#include "sdk/wire/batch.h"

typedef perf__batch_loops_t perf__loop_stats_t;       /* the sum and each loop's */
typedef perf__batch_loop_stats_t perf__loop_counts_t; /* one loop's, or the sum */

#define PERF__LOOP_STATS_BUCKETS PERF__LOOP_BUCKETS

/* The duration bucket of a unit of work (see PERF__LOOP_BUCKET_UPPER_MS). */
static inline unsigned perf__loop_stats_bucket(int64_t duration_ns) {
  return perf__batch_loop_bucket(duration_ns);
}

/* Add one loop's statistics (named) to s. */
static inline void perf__loop_stats_add(perf__loop_stats_t *s, const char *name,
                                        const perf__loop_counts_t *counts) {
  perf__batch_loops_add(s, name, counts);
}

#endif
