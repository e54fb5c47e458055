/*
 * rollup_batch.h - a batch's rollup rows (rollup.h, rollup_sql.h), made
 * at ingest from the batch the collector holds, not read back from the
 * rows it has just inserted: the same rows the SQL of rollup_sql.h makes
 * from those raw rows (which the rebuilds still use), each key once, in
 * key order, so a store merges them into its tables with plain upserts
 * (sqlite_rollups.c, pg_rollups.c). Reading the batch back cost
 * PostgreSQL a join whose plan, made when a day's partition was still
 * empty, scanned the whole partition at every batch.
 */
#ifndef PERF_COLLECTOR_ROLLUP_BATCH_H
#define PERF_COLLECTOR_ROLLUP_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "collector/model/records.h"

/* A rollup_groups row of one level, less the resource (the batch's app,
   version and environment, NULL stored as ""): a hang event counted in
   its group with all its samples (cpu_us 0); a cpu or profile event once
   per stack it sampled, that stack its group (of the event's kind) with
   the stack's samples and CPU time. */
typedef struct rollup_group_row_s {
  int64_t bucket_ns;
  const char *kind, *group_sig, *label; /* label "" for none */
  int dbin;
  int64_t events, samples, total_ns, first_ns, last_ns, max_ns, cpu_us;
} rollup_group_row_t;

/* A rollup_stacks row: every event's stacks (group "" for none), their
   samples, CPU time and wall time (rollup_wall_share). */
typedef struct rollup_stack_row_s {
  int64_t bucket_ns;
  const char *kind, *group_sig, *stack_sig, *label;
  int64_t samples, cpu_us, wall_ns;
  int64_t first_ns, last_end_ns;
} rollup_stack_row_t;

typedef struct rollup_batch_s {
  rollup_group_row_t *groups;
  size_t n_groups;
  rollup_stack_row_t *stacks;
  size_t n_stacks;
} rollup_batch_t;

/* The rows of b at the level of buckets size_ns wide (ROLLUP_BUCKET_NS,
   ROLLUP_DAY_NS); group[i] is the group stored with b->events[i] (the
   picked one for a hang with a key; NULL for none). The strings point
   into b and group. 0, or -1 when out of memory (out left empty). */
int rollup_batch_build(rollup_batch_t *out, const store_batch_t *b, const char *const *group,
                       int64_t size_ns);
void rollup_batch_free(rollup_batch_t *rb);

/* The start of the size_ns bucket holding ns (as ROLLUP_BUCKET_AT). */
int64_t rollup_bucket_at(int64_t ns, int64_t size_ns);

/* The groups b's events are stored with: group[i] is picked[i] for a
   hang with a key (store_event_t.hang: the store's pick writes it there),
   else events[i].group_sig. 0, or -1 when out of memory. */
typedef struct rollup_picks_s {
  char (*picked)[STORE_SIG_CHARS + 1];
  const char **group;
} rollup_picks_t;

int rollup_picks_init(rollup_picks_t *p, const store_batch_t *b);
void rollup_picks_free(rollup_picks_t *p);

#endif
