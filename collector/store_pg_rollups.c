/*
 * store_pg_rollups.c - the PostgreSQL backend's rollups (rollup.h,
 * rollup_sql.h): a batch rolled up at ingest in one statement, the
 * buckets retention or re-symbolization touched rebuilt. Each collector
 * writes its own shard of the rows (store_s.shard), so two collectors
 * rolling up the same bucket never wait on one row; a rebuild replaces
 * every shard of its buckets with rows of its own.
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "store_pg.h"

#include "rollup_batch.h"
#include "rollup_sql.h"

#define SHARD_COL ", shard"
#define SHARD_VAL ", $2::integer"

/* A batch's rows of both levels (rollup_batch.h) as arrays, each row
   with its level (0: 10 minutes, 1: days): one statement merges them into
   the four tables. $1 shard, $2-$4 the resource. */
#define GROUP_ARRAYS                                                                               \
  " FROM unnest($5::integer[], $6::bigint[], $7::text[], $8::text[], $9::text[], $10::integer[],"  \
  " $11::bigint[], $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[], $16::bigint[])"     \
  " AS u(lv, b, k, g, l, d, n, s, t, f, la, m)"
#define PUT_GROUPS(lvl, level)                                                                     \
  ROLLUP_GROUP_INTO(lvl, SHARD_COL)                                                                \
  " SELECT b, $2, $3, $4, k, g, l, d, $1::integer, n, s, t, f, la, m" GROUP_ARRAYS                 \
  " WHERE lv = " level                                                                             \
  ROLLUP_GROUP_MERGE(lvl, SHARD_COL)
#define STACK_ARRAYS                                                                               \
  " FROM unnest($17::integer[], $18::bigint[], $19::text[], $20::text[], $21::text[], "            \
  "$22::text[],"                                                                                   \
  " $23::bigint[], $24::double precision[], $25::bigint[], $26::bigint[])"                         \
  " AS u(lv, b, k, g, st, l, s, w, f, le)"
#define PUT_STACKS(lvl, level)                                                                     \
  ROLLUP_STACK_INTO(lvl, SHARD_COL)                                                                \
  " SELECT b, $2, $3, $4, k, g, st, l, $1::integer, s, w, f, le" STACK_ARRAYS " WHERE lv = " level \
  ROLLUP_STACK_MERGE(lvl, SHARD_COL)
static const char ADD_BATCH[] = "WITH g AS (" PUT_GROUPS("", "0") "), gd AS (" PUT_GROUPS(
    "_day", "1") "), s AS (" PUT_STACKS("", "0") ") " PUT_STACKS("_day", "1");

enum { GROUP_COLS = 12, STACK_COLS = 10 };

static void add_groups(pg_array_t *a, int level, const rollup_batch_t *rb) {
  for (size_t i = 0; i < rb->n_groups; i++) {
    const rollup_group_row_t *r = &rb->groups[i];
    pg_array_int(&a[0], level);
    pg_array_int(&a[1], r->bucket_ns);
    pg_array_text(&a[2], r->kind);
    pg_array_text(&a[3], r->group_sig);
    pg_array_text(&a[4], r->label);
    pg_array_int(&a[5], r->dbin);
    pg_array_int(&a[6], r->events);
    pg_array_int(&a[7], r->samples);
    pg_array_int(&a[8], r->total_ns);
    pg_array_int(&a[9], r->first_ns);
    pg_array_int(&a[10], r->last_ns);
    pg_array_int(&a[11], r->max_ns);
  }
}

static void add_stacks(pg_array_t *a, int level, const rollup_batch_t *rb) {
  for (size_t i = 0; i < rb->n_stacks; i++) {
    const rollup_stack_row_t *r = &rb->stacks[i];
    char wall[32];
    snprintf(wall, sizeof wall, "%.17g", r->wall_ns); /* read back exactly */
    pg_array_int(&a[0], level);
    pg_array_int(&a[1], r->bucket_ns);
    pg_array_text(&a[2], r->kind);
    pg_array_text(&a[3], r->group_sig);
    pg_array_text(&a[4], r->stack_sig);
    pg_array_text(&a[5], r->label);
    pg_array_int(&a[6], r->samples);
    pg_array_text(&a[7], wall);
    pg_array_int(&a[8], r->first_ns);
    pg_array_int(&a[9], r->last_end_ns);
  }
}

int pg_rollups_add_batch(store_t *st, const store_batch_t *b, const char *const *group) {
  static const int64_t size_ns[] = {ROLLUP_BUCKET_NS, ROLLUP_DAY_NS};
  pg_array_t a[GROUP_COLS + STACK_COLS] = {{0}};
  int rc = 0;
  for (int level = 0; rc == 0 && level < 2; level++) {
    rollup_batch_t rb;
    if (rollup_batch_build(&rb, b, group, size_ns[level]) != 0) {
      rc = -1;
      break;
    }
    add_groups(a, level, &rb);
    add_stacks(a + GROUP_COLS, level, &rb);
    rollup_batch_free(&rb);
  }
  pg_params_t p = {0};
  pg_int(&p, 1, st->shard);
  pg_text(&p, 2, b->app ? b->app : "");
  pg_text(&p, 3, b->version ? b->version : "");
  pg_text(&p, 4, b->environment ? b->environment : "");
  for (int i = 0; i < GROUP_COLS + STACK_COLS; i++) {
    pg_own(&p, 5 + i, pg_array_end(&a[i]));
    if (!p.v[4 + i]) rc = -1;
  }
  if (rc == 0) rc = pg_do(st, ADD_BATCH, &p, "rollups");
  pg_params_free(&p);
  return rc;
}

static const char DIRTY[] =
    "CREATE TEMP TABLE IF NOT EXISTS rollup_dirty(bucket_ns bigint PRIMARY KEY)"
    " ON COMMIT DELETE ROWS;"
    "CREATE TEMP TABLE IF NOT EXISTS rollup_dirty_days(day_ns bigint PRIMARY KEY)"
    " ON COMMIT DELETE ROWS";

int pg_rollups_mark(store_t *st, const char *events_sql, const pg_params_t *p) {
  if (pg_do(st, DIRTY, NULL, "rollups") != 0) return -1;
  return pg_do(st, events_sql, p, "rollups");
}

#define OWN ", $1::integer"
static const char *const REBUILD[] = {
    "DELETE FROM rollup_groups WHERE bucket_ns IN (SELECT bucket_ns FROM rollup_dirty)",
    "DELETE FROM rollup_stacks WHERE bucket_ns IN (SELECT bucket_ns FROM rollup_dirty)",
    ROLLUP_GROUPS_HANG("", ROLLUP_BUCKET_SQL, SHARD_COL, OWN, ROLLUP_SRC_DIRTY, "true"),
    ROLLUP_GROUPS_CPU("", ROLLUP_BUCKET_SQL, SHARD_COL, OWN, ROLLUP_SRC_DIRTY, "true"),
    ROLLUP_STACKS("", ROLLUP_BUCKET_SQL, SHARD_COL, OWN, ROLLUP_SRC_DIRTY, "true"),
    ROLLUP_MARK_DAYS,
    "DELETE FROM rollup_groups_day WHERE bucket_ns IN (SELECT day_ns FROM rollup_dirty_days)",
    "DELETE FROM rollup_stacks_day WHERE bucket_ns IN (SELECT day_ns FROM rollup_dirty_days)",
    ROLLUP_GROUPS_DAYS(SHARD_COL, OWN),
    ROLLUP_STACKS_DAYS(SHARD_COL, OWN),
    "DELETE FROM rollup_dirty",
    "DELETE FROM rollup_dirty_days",
};

/* Whether REBUILD[i] takes the shard as $1. */
static bool own_shard(size_t i) {
  return strstr(REBUILD[i], "$1::integer") != NULL;
}

int pg_rollups_rebuild(store_t *st) {
  pg_params_t p = {0};
  pg_int(&p, 1, st->shard);
  for (size_t i = 0; i < sizeof REBUILD / sizeof REBUILD[0]; i++)
    if (pg_do(st, REBUILD[i], own_shard(i) ? &p : NULL, "rollups rebuild") != 0) return -1;
  return 0;
}
