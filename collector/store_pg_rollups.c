/*
 * store_pg_rollups.c - the PostgreSQL backend's rollups (rollup.h,
 * rollup_sql.h): a batch rolled up at ingest in one statement, the
 * buckets retention or re-symbolization touched rebuilt. Each collector
 * writes its own shard of the rows (store_s.shard), so two collectors
 * rolling up the same bucket never wait on one row; a rebuild replaces
 * every shard of its buckets with rows of its own.
 */
#include <stdbool.h>
#include <string.h>

#include "store_pg.h"

#include "rollup_sql.h"

#define SHARD_COL ", shard"
#define SHARD_VAL ", $2::integer"

#define BATCH_SCOPE "e.batch_id = $1"
#define ON_BATCH(M, lvl, size) M(lvl, size, SHARD_COL, SHARD_VAL, "events e", BATCH_SCOPE)
#define H_TEN ON_BATCH(ROLLUP_GROUPS_HANG, "", ROLLUP_BUCKET_SQL)
#define C_TEN ON_BATCH(ROLLUP_GROUPS_CPU, "", ROLLUP_BUCKET_SQL)
#define S_TEN ON_BATCH(ROLLUP_STACKS, "", ROLLUP_BUCKET_SQL)
#define H_DAY ON_BATCH(ROLLUP_GROUPS_HANG, "_day", ROLLUP_DAY_SQL)
#define C_DAY ON_BATCH(ROLLUP_GROUPS_CPU, "_day", ROLLUP_DAY_SQL)
#define S_DAY ON_BATCH(ROLLUP_STACKS, "_day", ROLLUP_DAY_SQL)
/* Both levels of the batch's rows: one statement, one round trip. */
static const char ADD_BATCH[] = "WITH h AS (" H_TEN "), c AS (" C_TEN "), s AS (" S_TEN
                                "), hd AS (" H_DAY "), cd AS (" C_DAY ") " S_DAY;

int pg_rollups_add_batch(store_t *st, const store_batch_t *b) {
  pg_params_t p = {0};
  pg_bytes(&p, 1, b->id, STORE_BATCH_ID_BYTES);
  pg_int(&p, 2, st->shard);
  return pg_do(st, ADD_BATCH, &p, "rollups");
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
