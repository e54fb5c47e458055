/*
 * batch_loops.h - a batch's loop statistics (the wire's Batch.loop_stats
 * and Batch.loops) checked and copied into the store's records
 * (store_loop_stats_t, store_named_loop_t). Ingest, on its threads.
 */
#ifndef PERF_COLLECTOR_BATCH_LOOPS_H
#define PERF_COLLECTOR_BATCH_LOOPS_H

#include <stddef.h>

#include "collector/store/store.h"
#include "perf/v1/perf.pb-c.h"

/* 0 when bt's loop stats can be stored: the sum and each of Batch.loops
   with at most STORE_LOOP_BUCKETS buckets, at most STORE_MAX_LOOPS
   entries in Batch.loops, each named. Else -1 with msg (cap bytes) saying
   which field was wrong. */
int batch_loops_check(const Perf__V1__Batch *bt, char *msg, size_t cap);

/* ls into *out, each value capped at STORE_MAX_LOOP_VALUE, missing
   trailing buckets 0. */
void batch_loops_copy(const Perf__V1__LoopStats *ls, store_loop_stats_t *out);

/* Batch.loops into out (bt->n_loops entries at least; the names point
   into bt): entries of one name (possible once names are cut to the
   string limit) summed into one. Returns how many distinct loops. */
size_t batch_loops_named(const Perf__V1__Batch *bt, store_named_loop_t *out);

#endif
