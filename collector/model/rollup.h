/*
 * rollup.h - what both stores' rollups share (docs/internals/collector.md
 * "Rollups"): the time bucket, the duration bins that make percentiles
 * mergeable, and the plan that splits a query's time range into whole
 * buckets (read from the rollups) and the edges around them (read from
 * the raw rows), so an answer is the same whichever way it was read.
 *
 * The rollup tables (rollup_groups, rollup_stacks) are maintained at
 * ingest in the batch's transaction, rebuilt from the raw rows for the
 * buckets retention or re-symbolization touched, and built whole when an
 * older database is opened (sqlite_rollups.c, pg_rollups.c).
 */
#ifndef PERF_COLLECTOR_ROLLUP_H
#define PERF_COLLECTOR_ROLLUP_H

#include <stdbool.h>
#include <stdint.h>

#include "collector/model/records.h"

/* A rollup bucket: ten minutes of event starts, from the epoch. */
#define ROLLUP_BUCKET_NS INT64_C(600000000000)
#define ROLLUP_BUCKET_SQL "600000000000"
/* The coarser level: a day. */
#define ROLLUP_DAY_NS INT64_C(86400000000000)
#define ROLLUP_DAY_SQL "86400000000000"
/* The start of the bucket of size (SQL text) holding x, in SQL (both
   backends: % is the truncating remainder there too). */
#define ROLLUP_BUCKET_AT(x, size) "(" x " - ((" x " % " size ") + " size ") % " size ")"
#define ROLLUP_BUCKET_OF(x) ROLLUP_BUCKET_AT(x, ROLLUP_BUCKET_SQL)

int64_t rollup_bucket(int64_t ns);

/* Duration bins: exact below 8 ns, then 8 bins per power of two (each at
   most 1/8 of its lower bound wide). perf_dbin() in SQL computes the same
   (a C function registered on SQLite, a SQL function on PostgreSQL). */
#define ROLLUP_DBINS 488
int rollup_dbin(int64_t duration_ns);
int64_t rollup_dbin_low(int bin);
int64_t rollup_dbin_high(int bin);

/* A stack count's wall time: its share of its event's duration by
   samples, duration x samples / event_samples (all of the event's counts'
   samples), rounded down to the nanosecond; 0 when the event has no
   samples. A hang stack's own time (the API's hang_ms) is the sum of its
   counts' shares. Worked in doubles, in this order, and the duration taken
   within 0..ROLLUP_WALL_MAX_NS, exactly as ROLLUP_WALL_SHARE in
   rollup_sql.h does in SQL: the rollups made at ingest and the raw rows
   read back give the same integers, and integer sums do not depend on the
   order they are added in. */
#define ROLLUP_WALL_MAX_NS INT64_C(9007199254740992) /* 2^53: 104 days, exact in a double */
#define ROLLUP_WALL_MAX_SQL "9007199254740992"
int64_t rollup_wall_share(int64_t duration_ns, uint64_t samples, uint64_t event_samples);

/* Events counted per duration bin, for one group. */
typedef struct rollup_hist_s {
  struct rollup_hist_bin_s {
    int bin;
    uint64_t events;
  } * v;
  unsigned n, cap;
} rollup_hist_t;

/* 0, or -1 when out of memory. */
int rollup_hist_add(rollup_hist_t *h, int bin, uint64_t events);
void rollup_hist_free(rollup_hist_t *h);

/* The nearest-rank 95th percentile of the durations h counts: the middle
   of its bin (within 1/16 of every duration in it), or max_ns, the
   longest duration, when the rank falls in the longest's bin. */
int64_t rollup_hist_p95(rollup_hist_t *h, int64_t max_ns);

/* Where a query's rows come from. Day rows of the days starting in day
   (whole days of the range), 10-minute rows of the buckets starting in
   bucket[0] or bucket[1] (the whole buckets around those days) and raw
   events starting in raw[0] or raw[1] (the edges). Closed ranges, empty
   when [0] > [1]. */
typedef struct rollup_plan_s {
  int64_t day[2];
  int64_t bucket[2][2];
  int64_t raw[2][2];
} rollup_plan_t;

/* Whether the rollups can answer q: they keep the resource's app, version
   and environment and the event's label, not its host or its tags. */
bool rollup_answers(const store_top_query_t *q);

/* The plan of q: a bucket the range cuts is whole anyway when no event
   (whatever its filters) starts in the part left out; any_event(ctx, lo,
   hi) says whether one starts in [lo, hi]: 1 yes, 0 no, -1 failed (then
   the bucket is read raw). Without rollup_answers(q), everything raw. */
void rollup_plan(const store_top_query_t *q, int (*any_event)(void *ctx, int64_t lo, int64_t hi),
                 void *ctx, rollup_plan_t *out);

#endif
