/*
 * rollup_sql.h - the SQL that rolls raw rows up (rollup.h), written once
 * for both backends: SQLite (sqlite_rollups.c) and PostgreSQL
 * (pg_rollups.c) differ only in what the macros are given: where
 * the events come from (src: "events e", or the dirty buckets joined to
 * them), which ones (scope: one batch's, or 1), and PostgreSQL's shard
 * column (each collector writes its own rows, so two collectors never wait
 * on one row; the reads sum the shards).
 *
 * Two levels of the same tables: rollup_groups / rollup_stacks by
 * 10-minute bucket and rollup_groups_day / rollup_stacks_day by day, both
 * maintained at ingest; a rebuild makes the 10-minute rows from the raw
 * rows and the day rows from the 10-minute ones.
 *
 * Tables: rollup_groups holds per (bucket, app, version, environment,
 * kind, group, label, duration bin) the events, their samples (cpu: the
 * stack's samples), durations summed, earliest and latest start, longest
 * duration, and CPU time (cpu, profile: the stack's, the sum of its
 * samples' weights; 0 for hangs): what top-stacks shows. A hang's group is
 * its event's; a cpu or profile event counts once in the group of each
 * stack it sampled, under its own kind.
 * rollup_stacks holds per (bucket, app, version, environment, kind, group
 * ("" for none), stack, label) the stack's samples, its wall time (its
 * counts' shares of their events' durations, ROLLUP_WALL_SHARE), earliest
 * start, latest end and CPU time: what the flame graph and the exports
 * show. NULL app, version, environment and label are "". CPU time is the
 * last column of both (a column added to tables made before it).
 */
#ifndef PERF_COLLECTOR_ROLLUP_SQL_H
#define PERF_COLLECTOR_ROLLUP_SQL_H

#include "collector/model/rollup.h"

#define ROLLUP_DIMS "coalesce(b.app, ''), coalesce(b.version, ''), coalesce(b.environment, '')"
/* A count's CPU time: its samples' weights; 0 when its event has none. */
#define ROLLUP_CPU(c) "coalesce(" c ".cpu_us, 0)"
/* A count c's share of its event e's duration by samples, as
   rollup_wall_share computes it (rollup.h): the same double operations in
   the same order, so C and both databases give the same integer. */
#define ROLLUP_WALL_CLAMP(d)                                                                       \
  "CASE WHEN " d " < 0 THEN 0 WHEN " d " > " ROLLUP_WALL_MAX_SQL " THEN " ROLLUP_WALL_MAX_SQL      \
  " ELSE " d " END"
#define ROLLUP_WALL_SHARE(c, e)                                                                    \
  "CAST(floor(" c ".samples * CAST(" ROLLUP_WALL_CLAMP(                                            \
      e ".duration_ns") " AS DOUBLE PRECISION)"                                                    \
                        " / CAST(NULLIF((SELECT sum(y.samples) FROM stack_counts y WHERE "         \
                        "y.event_id = " e ".id), 0)"                                               \
                        " AS DOUBLE PRECISION)) AS BIGINT)"
#define ROLLUP_LEAST(a, b) "CASE WHEN " a " < " b " THEN " a " ELSE " b " END"
#define ROLLUP_GREATEST(a, b) "CASE WHEN " a " > " b " THEN " a " ELSE " b " END"
#define ROLLUP_KEY_ORDER " GROUP BY 1, 2, 3, 4, 5, 6, 7, 8 ORDER BY 1, 2, 3, 4, 5, 6, 7, 8"

/* Each statement is written for a level: lvl "" (10-minute buckets,
   ROLLUP_BUCKET_SQL) or "_day" (days, ROLLUP_DAY_SQL), the tables
   rollup_groups<lvl> and rollup_stacks<lvl>. */
#define ROLLUP_GROUP_COLS "bucket_ns, app, version, environment, kind, group_sig, label, dbin"
#define ROLLUP_GROUP_INTO(lvl, shard_col)                                                          \
  "INSERT INTO rollup_groups" lvl "(" ROLLUP_GROUP_COLS shard_col                                  \
  ", events, samples, total_ns, first_ns, last_ns, max_ns, cpu_us)"
#define ROLLUP_GROUP_MERGE(lvl, shard_col)                                                         \
  " ON CONFLICT(" ROLLUP_GROUP_COLS shard_col ") DO UPDATE SET"                                    \
  " events = rollup_groups" lvl ".events + excluded.events,"                                       \
  " samples = rollup_groups" lvl ".samples + excluded.samples,"                                    \
  " cpu_us = rollup_groups" lvl ".cpu_us + excluded.cpu_us,"                                       \
  " total_ns = rollup_groups" lvl ".total_ns + excluded.total_ns,"                                 \
  " first_ns = " ROLLUP_LEAST(                                                                     \
      "rollup_groups" lvl ".first_ns",                                                             \
      "excluded.first_ns") ","                                                                     \
                           " last_ns = " ROLLUP_GREATEST(                                          \
                               "rollup_groups" lvl ".last_ns",                                     \
                               "excluded.last_ns") ","                                             \
                                                   " max_ns = " ROLLUP_GREATEST(                   \
                                                       "rollup_groups" lvl ".max_ns",              \
                                                       "excluded.max_ns")

/* Hang events, by their group. */
#define ROLLUP_GROUPS_HANG(lvl, size, shard_col, shard_val, src, scope)                            \
  ROLLUP_GROUP_INTO(lvl, shard_col)                                                                \
  " SELECT " ROLLUP_BUCKET_AT(                                                                     \
      "e.start_ns",                                                                                \
      size) ", " ROLLUP_DIMS                                                                       \
            ", e.kind, e.group_sig, coalesce(e.label, ''), perf_dbin(e.duration_ns)" shard_val     \
            ", count(*),"                                                                          \
            " sum((SELECT coalesce(sum(c.samples), 0) FROM stack_counts c WHERE c.event_id = "     \
            "e.id)),"                                                                              \
            " sum(e.duration_ns), min(e.start_ns), max(e.start_ns), max(e.duration_ns), 0"         \
            " FROM " src " JOIN batches b ON b.id = e.batch_id"                                    \
            " WHERE e.kind IN ('hang', 'fatal_hang') AND e.group_sig IS NOT NULL"                  \
            " AND e.start_ns IS NOT NULL AND e.duration_ns IS NOT NULL AND " scope                 \
                ROLLUP_KEY_ORDER                                                                   \
                ROLLUP_GROUP_MERGE(lvl, shard_col)

/* Cpu and profile events, once per stack they sampled (its weight in the
   event), in a group of their kind. */
#define ROLLUP_GROUPS_CPU(lvl, size, shard_col, shard_val, src, scope)                             \
  ROLLUP_GROUP_INTO(lvl, shard_col)                                                                \
  " SELECT " ROLLUP_BUCKET_AT(                                                                     \
      "x.start_ns",                                                                                \
      size) ", x.app, x.version, x.environment, x.kind, x.stack_sig, x.label, "                    \
            "perf_dbin(x.duration_ns)" shard_val                                                   \
            ", count(*), sum(x.n), sum(x.duration_ns), min(x.start_ns), max(x.start_ns),"          \
            " max(x.duration_ns), sum(x.w) FROM (SELECT e.start_ns AS start_ns, e.duration_ns AS " \
            "duration_ns, e.kind AS kind,"                                                         \
            " coalesce(b.app, '') AS app, coalesce(b.version, '') AS version,"                     \
            " coalesce(b.environment, '') AS environment, coalesce(e.label, '') AS label,"         \
            " c.stack_sig AS stack_sig, sum(c.samples) AS n, sum(" ROLLUP_CPU(                     \
                "c") ") AS w"                                                                      \
                     " FROM " src " JOIN batches b ON b.id = e.batch_id JOIN stack_counts c ON "   \
                     "c.event_id = e.id"                                                           \
                     " WHERE e.kind IN ('cpu', 'profile') AND e.start_ns IS NOT NULL AND "         \
                     "e.duration_ns IS NOT "                                                       \
                     "NULL AND " scope " GROUP BY e.id, e.kind, c.stack_sig, b.app, b.version, "   \
                     "b.environment, e.start_ns, e.duration_ns,"                                   \
                     " e.label) x WHERE true" ROLLUP_KEY_ORDER                                     \
                     ROLLUP_GROUP_MERGE(lvl, shard_col)

#define ROLLUP_STACK_COLS "bucket_ns, app, version, environment, kind, group_sig, stack_sig, label"
#define ROLLUP_STACK_MERGE(lvl, shard_col)                                                         \
  " ON CONFLICT(" ROLLUP_STACK_COLS shard_col ") DO UPDATE SET"                                    \
  " samples = rollup_stacks" lvl ".samples + excluded.samples,"                                    \
  " cpu_us = rollup_stacks" lvl ".cpu_us + excluded.cpu_us,"                                       \
  " wall_ns = rollup_stacks" lvl ".wall_ns + excluded.wall_ns,"                                    \
  " first_ns = " ROLLUP_LEAST("rollup_stacks" lvl ".first_ns",                                     \
                              "excluded.first_ns") ","                                             \
                                                   " last_end_ns = " ROLLUP_GREATEST(              \
                                                       "rollup_stacks" lvl ".last_end_ns",         \
                                                       "excluded.last_end_ns")
#define ROLLUP_STACK_INTO(lvl, shard_col)                                                          \
  "INSERT INTO rollup_stacks" lvl "(" ROLLUP_STACK_COLS shard_col                                  \
  ", samples, wall_ns, first_ns, last_end_ns, cpu_us)"
/* Every event's stacks. */
#define ROLLUP_STACKS(lvl, size, shard_col, shard_val, src, scope)                                 \
  ROLLUP_STACK_INTO(lvl, shard_col)                                                                \
  " SELECT " ROLLUP_BUCKET_AT(                                                                     \
      "e.start_ns",                                                                                \
      size) ", " ROLLUP_DIMS ", e.kind, coalesce(e.group_sig, ''), c.stack_sig, "                  \
            "coalesce(e.label, '')" shard_val ", sum(c.samples), coalesce(sum(" ROLLUP_WALL_SHARE( \
                "c", "e") "), 0), min(e.start_ns),"                                                \
                          " max(e.start_ns + e.duration_ns), sum(" ROLLUP_CPU(                     \
                              "c") ") FROM " src " JOIN batches b ON b.id = e.batch_id"            \
                                   " JOIN stack_counts c ON c.event_id = e.id "                    \
                                   "WHERE e.start_ns IS NOT NULL"                                  \
                                   " AND e.duration_ns IS NOT NULL AND " scope ROLLUP_KEY_ORDER    \
                                   ROLLUP_STACK_MERGE(lvl, shard_col)

/* The day rows of the dirty days (rollup_dirty_days) summed from their
   10-minute rows (every shard's). */
#define ROLLUP_GROUPS_DAYS(shard_col, shard_val)                                                   \
  ROLLUP_GROUP_INTO("_day", shard_col)                                                             \
  " SELECT " ROLLUP_BUCKET_AT(                                                                     \
      "r.bucket_ns",                                                                               \
      ROLLUP_DAY_SQL) ", r.app, r.version, r.environment, r.kind, r.group_sig, r.label, "          \
                      "r.dbin" shard_val ", sum(r.events), sum(r.samples), sum(r.total_ns), "      \
                      "min(r.first_ns), max(r.last_ns),"                                           \
                      " max(r.max_ns), sum(r.cpu_us) FROM rollup_dirty_days d JOIN rollup_groups " \
                      "r ON "                                                                      \
                      "r.bucket_ns >= d.day_ns"                                                    \
                      " AND r.bucket_ns < d.day_ns + " ROLLUP_DAY_SQL                              \
                      " WHERE true" ROLLUP_KEY_ORDER ROLLUP_GROUP_MERGE("_day", shard_col)
#define ROLLUP_STACKS_DAYS(shard_col, shard_val)                                                   \
  ROLLUP_STACK_INTO("_day", shard_col)                                                             \
  " SELECT " ROLLUP_BUCKET_AT(                                                                     \
      "r.bucket_ns",                                                                               \
      ROLLUP_DAY_SQL) ", r.app, r.version, r.environment, r.kind, r.group_sig, r.stack_sig, "      \
                      "r.label" shard_val                                                          \
                      ", sum(r.samples), sum(r.wall_ns), min(r.first_ns), max(r.last_end_ns),"     \
                      " sum(r.cpu_us)"                                                             \
                      " FROM rollup_dirty_days d JOIN rollup_stacks r ON r.bucket_ns >= d.day_ns"  \
                      " AND r.bucket_ns < d.day_ns + " ROLLUP_DAY_SQL                              \
                      " WHERE true" ROLLUP_KEY_ORDER ROLLUP_STACK_MERGE("_day", shard_col)

/* The delta tables: a batch's 10-minute rows appended to
   rollup_groups_delta and rollup_stacks_delta (rollup_batch.h), tables of
   the 10-minute tables' columns without a key (an append to a table
   without an index costs a fraction of an upsert into the nine-column
   keys, and this bucket's hot rows are not rewritten at every batch). A
   fold moves them into both levels, each key once; until then the reads
   add them to a level's rows: ROLLUP_GROUP_ROWS_OF and
   ROLLUP_STACK_ROWS_OF, each delta row in its 10-minute bucket or its
   day. */
#define ROLLUP_DAY_OF_BUCKET ROLLUP_BUCKET_AT("bucket_ns", ROLLUP_DAY_SQL)
#define ROLLUP_GROUP_VALS "events, samples, total_ns, first_ns, last_ns, max_ns, cpu_us"
#define ROLLUP_STACK_VALS "samples, wall_ns, first_ns, last_end_ns, cpu_us"
#define ROLLUP_GROUP_ROWS_OF(lvl, bucket)                                                          \
  "(SELECT " ROLLUP_GROUP_COLS ", " ROLLUP_GROUP_VALS " FROM rollup_groups" lvl                    \
  " UNION ALL SELECT " bucket                                                                      \
  ", app, version, environment, kind, group_sig, label, dbin, " ROLLUP_GROUP_VALS                  \
  " FROM rollup_groups_delta)"
#define ROLLUP_STACK_ROWS_OF(lvl, bucket)                                                          \
  "(SELECT " ROLLUP_STACK_COLS ", " ROLLUP_STACK_VALS " FROM rollup_stacks" lvl                    \
  " UNION ALL SELECT " bucket                                                                      \
  ", app, version, environment, kind, group_sig, stack_sig, label, " ROLLUP_STACK_VALS             \
  " FROM rollup_stacks_delta)"
#define ROLLUP_GROUPS_10M ROLLUP_GROUP_ROWS_OF("", "bucket_ns")
#define ROLLUP_GROUPS_DAY ROLLUP_GROUP_ROWS_OF("_day", ROLLUP_DAY_OF_BUCKET)
#define ROLLUP_STACKS_10M ROLLUP_STACK_ROWS_OF("", "bucket_ns")
#define ROLLUP_STACKS_DAY ROLLUP_STACK_ROWS_OF("_day", ROLLUP_DAY_OF_BUCKET)

/* PostgreSQL's fold statements (SQLite sums its delta rows in C,
   rollup_sums.h, and upserts each key): the delta rows of src (the rows
   just deleted) summed per key (ROLLUP_FOLD_*_SUMS: a select of a
   level's columns, bucket the 10-minute bucket_ns or ROLLUP_DAY_OF_BUCKET),
   and those sums merged into a level's rows. */
#define ROLLUP_FOLD_GROUP_SUMS(bucket, shard_val, src)                                             \
  " SELECT " bucket ", app, version, environment, kind, group_sig, label, dbin" shard_val          \
  ", sum(events), sum(samples), sum(total_ns), min(first_ns), max(last_ns), max(max_ns),"          \
  " sum(cpu_us) FROM " src " WHERE true" ROLLUP_KEY_ORDER
#define ROLLUP_FOLD_STACK_SUMS(bucket, shard_val, src)                                             \
  " SELECT " bucket ", app, version, environment, kind, group_sig, stack_sig, label" shard_val     \
  ", sum(samples), sum(wall_ns), min(first_ns), max(last_end_ns), sum(cpu_us)"                     \
  " FROM " src " WHERE true" ROLLUP_KEY_ORDER
#define ROLLUP_FOLD_GROUPS(lvl, bucket, shard_col, shard_val, src)                                 \
  ROLLUP_GROUP_INTO(lvl, shard_col)                                                                \
  ROLLUP_FOLD_GROUP_SUMS(bucket, shard_val, src) ROLLUP_GROUP_MERGE(lvl, shard_col)
#define ROLLUP_FOLD_STACKS(lvl, bucket, shard_col, shard_val, src)                                 \
  ROLLUP_STACK_INTO(lvl, shard_col)                                                                \
  ROLLUP_FOLD_STACK_SUMS(bucket, shard_val, src) ROLLUP_STACK_MERGE(lvl, shard_col)

/* The events of the dirty buckets (a temporary table rollup_dirty). */
#define ROLLUP_SRC_DIRTY                                                                           \
  "rollup_dirty d JOIN events e ON e.start_ns >= d.bucket_ns"                                      \
  " AND e.start_ns < d.bucket_ns + " ROLLUP_BUCKET_SQL

/* The days of the dirty buckets, into rollup_dirty_days. */
#define ROLLUP_MARK_DAYS                                                                           \
  "INSERT INTO rollup_dirty_days(day_ns) SELECT DISTINCT " ROLLUP_BUCKET_AT(                       \
      "bucket_ns", ROLLUP_DAY_SQL) " FROM rollup_dirty WHERE true ON CONFLICT DO NOTHING"

#endif
