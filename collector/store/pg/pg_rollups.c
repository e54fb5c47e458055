/*
 * pg_rollups.c - the PostgreSQL backend's rollups (rollup.h,
 * rollup_sql.h). A batch appends its 10-minute rows (rollup_batch.h) to
 * the delta tables, rollup_groups_delta and rollup_stacks_delta, in one
 * statement: an append to a table without an index costs a quarter of an
 * upsert into the rollup tables' nine-column keys, and the same hot rows
 * (this bucket's stacks) are not updated again at every batch. A fold
 * (pg_fold.c's thread, every --rollup-fold-interval) moves the
 * delta rows into the rollup tables of both levels, each key once; the
 * reads add the delta rows not folded yet (pg_query.c), so an
 * answer does not wait for a fold.
 *
 * Each collector folds into its own shard of the rollup rows
 * (store_s.shard), so two collectors never wait on one row; a rebuild
 * folds first, then replaces every shard of its buckets with rows of its
 * own.
 */
#include <stdbool.h>
#include <string.h>

#include "collector/store/pg/pg_store.h"

#include "collector/model/rollup_batch.h"
#include "collector/store/rollup_sql.h"

#define SHARD_COL ", shard"

/* A batch's 10-minute rows as arrays, $1-$3 the resource. */
static const char ADD_BATCH[] =
    "WITH g AS (INSERT INTO rollup_groups_delta(" ROLLUP_GROUP_COLS
    ", events, samples, total_ns, first_ns, last_ns, max_ns, cpu_us)"
    " SELECT b, $1, $2, $3, k, g, l, d, n, s, t, f, la, m, c FROM unnest($4::bigint[], $5::text[],"
    " $6::text[], $7::text[], $8::integer[], $9::bigint[], $10::bigint[], $11::bigint[],"
    " $12::bigint[], $13::bigint[], $14::bigint[], $15::bigint[])"
    " AS u(b, k, g, l, d, n, s, t, f, la, m, c))"
    " INSERT INTO rollup_stacks_delta(" ROLLUP_STACK_COLS ", samples, wall_ns, first_ns,"
    " last_end_ns, cpu_us) SELECT b, $1, $2, $3, k, g, st, l, s, w, f, le, c"
    " FROM unnest($16::bigint[], $17::text[], $18::text[], $19::text[], $20::text[],"
    " $21::bigint[], $22::bigint[], $23::bigint[], $24::bigint[], $25::bigint[])"
    " AS u(b, k, g, st, l, s, w, f, le, c)";

enum { GROUP_COLS = 12, STACK_COLS = 10 };

static void add_groups(pg_array_t *a, const rollup_batch_t *rb) {
  for (size_t i = 0; i < rb->n_groups; i++) {
    const rollup_group_row_t *r = &rb->groups[i];
    pg_array_int(&a[0], r->bucket_ns);
    pg_array_text(&a[1], r->kind);
    pg_array_text(&a[2], r->group_sig);
    pg_array_text(&a[3], r->label);
    pg_array_int(&a[4], r->dbin);
    pg_array_int(&a[5], r->events);
    pg_array_int(&a[6], r->samples);
    pg_array_int(&a[7], r->total_ns);
    pg_array_int(&a[8], r->first_ns);
    pg_array_int(&a[9], r->last_ns);
    pg_array_int(&a[10], r->max_ns);
    pg_array_int(&a[11], r->cpu_us);
  }
}

static void add_stacks(pg_array_t *a, const rollup_batch_t *rb) {
  for (size_t i = 0; i < rb->n_stacks; i++) {
    const rollup_stack_row_t *r = &rb->stacks[i];
    pg_array_int(&a[0], r->bucket_ns);
    pg_array_text(&a[1], r->kind);
    pg_array_text(&a[2], r->group_sig);
    pg_array_text(&a[3], r->stack_sig);
    pg_array_text(&a[4], r->label);
    pg_array_int(&a[5], r->samples);
    pg_array_int(&a[6], r->wall_ns);
    pg_array_int(&a[7], r->first_ns);
    pg_array_int(&a[8], r->last_end_ns);
    pg_array_int(&a[9], r->cpu_us);
  }
}

int pg_rollups_add_batch(store_t *st, const store_batch_t *b, const char *const *group) {
  rollup_batch_t rb;
  if (rollup_batch_build(&rb, b, group, ROLLUP_BUCKET_NS) != 0) return -1;
  pg_array_t a[GROUP_COLS + STACK_COLS] = {{0}};
  add_groups(a, &rb);
  add_stacks(a + GROUP_COLS, &rb);
  rollup_batch_free(&rb);
  pg_params_t p = {0};
  pg_text(&p, 1, b->app ? b->app : "");
  pg_text(&p, 2, b->version ? b->version : "");
  pg_text(&p, 3, b->environment ? b->environment : "");
  int rc = pg_own_arrays(&p, 4, a, GROUP_COLS + STACK_COLS);
  if (rc == 0) rc = pg_do(st, ADD_BATCH, &p, "rollups");
  pg_params_free(&p);
  return rc;
}

/* The delta rows taken (each collector's: whoever folds takes them all)
   and summed per key into this collector's shard ($1) of both levels: the
   10-minute rows by their bucket, the day rows by its day. A delta row
   appended after the statement began stays for the next fold. */
#define FOLD_GROUPS(lvl, bucket) ROLLUP_FOLD_GROUPS(lvl, bucket, SHARD_COL, ", $1::integer", "dg")
#define FOLD_STACKS(lvl, bucket) ROLLUP_FOLD_STACKS(lvl, bucket, SHARD_COL, ", $1::integer", "ds")
#define FOLD_GROUPS_10M FOLD_GROUPS("", "bucket_ns")
#define FOLD_GROUPS_DAY FOLD_GROUPS("_day", ROLLUP_DAY_OF_BUCKET)
#define FOLD_STACKS_10M FOLD_STACKS("", "bucket_ns")
#define FOLD_STACKS_DAY FOLD_STACKS("_day", ROLLUP_DAY_OF_BUCKET)
static const char FOLD[] = "WITH dg AS (DELETE FROM rollup_groups_delta RETURNING *),"
                           " ds AS (DELETE FROM rollup_stacks_delta RETURNING *),"
                           " g AS (" FOLD_GROUPS_10M "), gd AS (" FOLD_GROUPS_DAY "),"
                           " s AS (" FOLD_STACKS_10M ") " FOLD_STACKS_DAY;

int pg_rollups_fold(store_t *st, bool wait) {
  pg_params_t p = {0};
  pg_int(&p, 1, PG_LOCK_FOLD);
  PGresult *r = pg_run(st,
                       wait ? "SELECT pg_advisory_xact_lock($1::bigint), true"
                            : "SELECT pg_try_advisory_xact_lock($1::bigint)",
                       &p, "fold lock");
  if (!r) return -1;
  bool got = strcmp(PQgetvalue(r, 0, wait ? 1 : 0), "t") == 0;
  PQclear(r);
  if (!got) return 0; /* another collector is folding */
  pg_int(&p, 1, st->shard);
  return pg_do(st, FOLD, &p, "rollups fold");
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
  PGresult *r = pg_run(st, "SELECT EXISTS (SELECT 1 FROM rollup_dirty)", NULL, "rollups rebuild");
  if (!r) return -1;
  bool dirty = strcmp(PQgetvalue(r, 0, 0), "t") == 0;
  PQclear(r);
  /* The delta rows folded first (the rebuilt buckets' would count twice):
     this waits for a fold of another collector's to end. */
  if (!dirty) return 0;
  if (pg_rollups_fold(st, true) != 0) return -1;
  pg_params_t p = {0};
  pg_int(&p, 1, st->shard);
  for (size_t i = 0; i < sizeof REBUILD / sizeof REBUILD[0]; i++)
    if (pg_do(st, REBUILD[i], own_shard(i) ? &p : NULL, "rollups rebuild") != 0) return -1;
  return 0;
}
