/*
 * sqlite_rollups.c - rollups in SQLite (see sqlite_rollups.h).
 */
#include "collector/store/sqlite/sqlite_rollups.h"

#include <stdlib.h>

#include "collector/model/rollup_batch.h"
#include "collector/model/rollup_sums.h"
#include "collector/store/rollup_sql.h"

#define GROUPS_COLUMNS                                                                             \
  "(bucket_ns INTEGER NOT NULL,"                                                                   \
  " app TEXT NOT NULL, version TEXT NOT NULL, environment TEXT NOT NULL, kind TEXT NOT NULL,"      \
  " group_sig TEXT NOT NULL, label TEXT NOT NULL, dbin INTEGER NOT NULL,"                          \
  " events INTEGER NOT NULL, samples INTEGER NOT NULL, total_ns INTEGER NOT NULL,"                 \
  " first_ns INTEGER NOT NULL, last_ns INTEGER NOT NULL, max_ns INTEGER NOT NULL,"                 \
  " cpu_us INTEGER NOT NULL"
#define STACKS_COLUMNS                                                                             \
  "(bucket_ns INTEGER NOT NULL,"                                                                   \
  " app TEXT NOT NULL, version TEXT NOT NULL, environment TEXT NOT NULL, kind TEXT NOT NULL,"      \
  " group_sig TEXT NOT NULL, stack_sig TEXT NOT NULL, label TEXT NOT NULL,"                        \
  " samples INTEGER NOT NULL, wall_ns INTEGER NOT NULL, first_ns INTEGER NOT NULL,"                \
  " last_end_ns INTEGER NOT NULL, cpu_us INTEGER NOT NULL"
#define GROUPS_TABLE(lvl)                                                                          \
  "CREATE TABLE IF NOT EXISTS rollup_groups" lvl GROUPS_COLUMNS ", PRIMARY KEY(" ROLLUP_GROUP_COLS \
  ")) WITHOUT ROWID;"
#define STACKS_TABLE(lvl)                                                                          \
  "CREATE TABLE IF NOT EXISTS rollup_stacks" lvl STACKS_COLUMNS ", PRIMARY KEY(" ROLLUP_STACK_COLS \
  ")) WITHOUT ROWID;"

/* The delta tables (rollup_sql.h): appended to by the batches, emptied by
   the folds; no key, no index. */
static const char SCHEMA[] = GROUPS_TABLE("") STACKS_TABLE("") GROUPS_TABLE("_day") STACKS_TABLE(
    "_day") "CREATE TABLE IF NOT EXISTS rollup_groups_delta" GROUPS_COLUMNS ");"
            "CREATE TABLE IF NOT EXISTS rollup_stacks_delta" STACKS_COLUMNS ");"
            "CREATE INDEX IF NOT EXISTS events_start ON events(start_ns);"
            "CREATE TEMP TABLE IF NOT EXISTS rollup_dirty(bucket_ns INTEGER PRIMARY KEY);"
            "CREATE TEMP TABLE IF NOT EXISTS rollup_dirty_days(day_ns INTEGER PRIMARY KEY);"
            /* re-symbolization's (sqlite_store.c), read by RS_MARK_RESYM */
            "CREATE TEMP TABLE IF NOT EXISTS resym_events(id INTEGER PRIMARY KEY);";

/* A batch's 10-minute rows (rollup_batch.h) appended to the delta tables. */
#define ADD_GROUP                                                                                  \
  "INSERT INTO rollup_groups_delta(" ROLLUP_GROUP_COLS ", " ROLLUP_GROUP_VALS                      \
  ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)"
#define ADD_STACK                                                                                  \
  "INSERT INTO rollup_stacks_delta(" ROLLUP_STACK_COLS ", " ROLLUP_STACK_VALS                      \
  ") VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)"
/* A fold's: the delta rows key first (the bucket, the texts, then dbin),
   and a key's sums merged into a level, bound in the same order. */
#define READ_GROUPS "SELECT " ROLLUP_GROUP_COLS ", " ROLLUP_GROUP_VALS " FROM rollup_groups_delta"
#define READ_STACKS "SELECT " ROLLUP_STACK_COLS ", " ROLLUP_STACK_VALS " FROM rollup_stacks_delta"
#define PUT_GROUP(lvl)                                                                             \
  ROLLUP_GROUP_INTO(lvl, "")                                                                       \
  " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)" ROLLUP_GROUP_MERGE(  \
      lvl, "")
#define PUT_STACK(lvl)                                                                             \
  ROLLUP_STACK_INTO(lvl, "")                                                                       \
  " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)" ROLLUP_STACK_MERGE(lvl, "")
enum rs_stmt {
  RS_ADD_GROUP,
  RS_ADD_STACK,
  RS_READ_GROUPS,
  RS_READ_STACKS,
  RS_PUT_GROUP,
  RS_PUT_GROUP_DAY,
  RS_PUT_STACK,
  RS_PUT_STACK_DAY,
  RS_DELTA_GROUPS_EMPTY,
  RS_DELTA_STACKS_EMPTY,
  RS_MARK_BEFORE,
  RS_MARK_RESYM,
  RS_MARK_ALL,
  RS_CLEAR_GROUPS,
  RS_CLEAR_STACKS,
  RS_DIRTY_HANG,
  RS_DIRTY_CPU,
  RS_DIRTY_STACKS,
  RS_MARK_DAYS,
  RS_CLEAR_GROUPS_DAY,
  RS_CLEAR_STACKS_DAY,
  RS_DAYS_GROUPS,
  RS_DAYS_STACKS,
  RS_DIRTY_EMPTY,
  RS_DIRTY_DAYS_EMPTY,
  RS_COUNT
};

static const char *const RS_SQL[RS_COUNT] = {
    [RS_ADD_GROUP] = ADD_GROUP,
    [RS_ADD_STACK] = ADD_STACK,
    /* A fold: the delta rows read in the order stored and summed per key
       in C (rollup_sums.h), each key's sums merged into both levels. */
    [RS_READ_GROUPS] = READ_GROUPS,
    [RS_READ_STACKS] = READ_STACKS,
    [RS_PUT_GROUP] = PUT_GROUP(""),
    [RS_PUT_GROUP_DAY] = PUT_GROUP("_day"),
    [RS_PUT_STACK] = PUT_STACK(""),
    [RS_PUT_STACK_DAY] = PUT_STACK("_day"),
    [RS_DELTA_GROUPS_EMPTY] = "DELETE FROM rollup_groups_delta",
    [RS_DELTA_STACKS_EMPTY] = "DELETE FROM rollup_stacks_delta",
    [RS_MARK_BEFORE] =
        "INSERT OR IGNORE INTO rollup_dirty(bucket_ns) SELECT DISTINCT " ROLLUP_BUCKET_OF(
            "e.start_ns") " FROM events e JOIN batches b ON b.id = e.batch_id"
                          " WHERE b.received_ns < ?1 AND e.start_ns IS NOT NULL",
    [RS_MARK_RESYM] =
        "INSERT OR IGNORE INTO rollup_dirty(bucket_ns) SELECT DISTINCT " ROLLUP_BUCKET_OF(
            "e.start_ns") " FROM resym_events r JOIN events e ON e.id = r.id WHERE e.start_ns IS "
                          "NOT NULL",
    [RS_MARK_ALL] =
        "INSERT OR IGNORE INTO rollup_dirty(bucket_ns) SELECT DISTINCT " ROLLUP_BUCKET_OF(
            "start_ns") " FROM events WHERE start_ns IS NOT NULL",
    [RS_CLEAR_GROUPS] =
        "DELETE FROM rollup_groups WHERE bucket_ns IN (SELECT bucket_ns FROM rollup_dirty)",
    [RS_CLEAR_STACKS] =
        "DELETE FROM rollup_stacks WHERE bucket_ns IN (SELECT bucket_ns FROM rollup_dirty)",
    [RS_DIRTY_HANG] = ROLLUP_GROUPS_HANG("", ROLLUP_BUCKET_SQL, "", "", ROLLUP_SRC_DIRTY, "1"),
    [RS_DIRTY_CPU] = ROLLUP_GROUPS_CPU("", ROLLUP_BUCKET_SQL, "", "", ROLLUP_SRC_DIRTY, "1"),
    [RS_DIRTY_STACKS] = ROLLUP_STACKS("", ROLLUP_BUCKET_SQL, "", "", ROLLUP_SRC_DIRTY, "1"),
    [RS_MARK_DAYS] = ROLLUP_MARK_DAYS,
    [RS_CLEAR_GROUPS_DAY] =
        "DELETE FROM rollup_groups_day WHERE bucket_ns IN (SELECT day_ns FROM rollup_dirty_days)",
    [RS_CLEAR_STACKS_DAY] =
        "DELETE FROM rollup_stacks_day WHERE bucket_ns IN (SELECT day_ns FROM rollup_dirty_days)",
    [RS_DAYS_GROUPS] = ROLLUP_GROUPS_DAYS("", ""),
    [RS_DAYS_STACKS] = ROLLUP_STACKS_DAYS("", ""),
    [RS_DIRTY_EMPTY] = "DELETE FROM rollup_dirty",
    [RS_DIRTY_DAYS_EMPTY] = "DELETE FROM rollup_dirty_days",
};

struct store_rollups_s {
  sqlite3 *db;
  sqlite3_stmt *stmt[RS_COUNT];
};

/* perf_dbin(duration_ns): rollup_dbin; NULL for NULL. */
static void sql_dbin(sqlite3_context *ctx, int argc, sqlite3_value **argv) {
  (void)argc;
  if (sqlite3_value_type(argv[0]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  sqlite3_result_int(ctx, rollup_dbin(sqlite3_value_int64(argv[0])));
}

static int run(store_rollups_t *rs, enum rs_stmt id) {
  int rc = sqlite3_step(rs->stmt[id]);
  sqlite3_reset(rs->stmt[id]);
  return rc == SQLITE_DONE || rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* The count sql answers. */
static int count_of(sqlite3 *db, const char *sql, int *n) {
  sqlite3_stmt *s;
  int rc = sqlite3_prepare_v2(db, sql, -1, &s, NULL);
  if (rc != SQLITE_OK) return rc;
  rc = sqlite3_step(s);
  *n = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : 0;
  sqlite3_finalize(s);
  return rc == SQLITE_ROW ? SQLITE_OK : rc;
}

/* Whether the tables are there already, as this collector makes them:
   tables of a collector before CPU time (cpu_us, an integer wall_ns) are
   dropped, to be made and built again from the raw rows. */
static int tables_exist(sqlite3 *db, int *exist) {
  int rc =
      count_of(db, "SELECT count(*) FROM sqlite_master WHERE name = 'rollup_stacks_day'", exist);
  int current = 0;
  if (rc == SQLITE_OK && *exist)
    rc = count_of(db,
                  "SELECT count(*) FROM pragma_table_info('rollup_stacks_day')"
                  " WHERE name = 'cpu_us'",
                  &current);
  if (rc == SQLITE_OK && *exist && !current) {
    *exist = 0;
    /* All four or none: a crash in between leaves them to drop again. */
    rc = sqlite3_exec(db,
                      "BEGIN IMMEDIATE; DROP TABLE IF EXISTS rollup_groups;"
                      " DROP TABLE IF EXISTS rollup_stacks; DROP TABLE IF EXISTS rollup_groups_day;"
                      " DROP TABLE rollup_stacks_day; DROP TABLE IF EXISTS rollup_groups_delta;"
                      " DROP TABLE IF EXISTS rollup_stacks_delta; COMMIT",
                      NULL, NULL, NULL);
    if (rc != SQLITE_OK) sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
  }
  return rc;
}

/* Every stored event rolled up (an older database's first open: its
   rows of either level, if any, made again). */
static int build_all(store_rollups_t *rs) {
  int rc = sqlite3_exec(rs->db, "BEGIN IMMEDIATE", NULL, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  rc = run(rs, RS_DELTA_GROUPS_EMPTY); /* the raw rows hold them too */
  if (rc == SQLITE_OK) rc = run(rs, RS_DELTA_STACKS_EMPTY);
  if (rc == SQLITE_OK) rc = run(rs, RS_MARK_ALL);
  if (rc == SQLITE_OK) rc = store_rollups_rebuild(rs);
  if (rc == SQLITE_OK) rc = sqlite3_exec(rs->db, "COMMIT", NULL, NULL, NULL);
  if (rc != SQLITE_OK) sqlite3_exec(rs->db, "ROLLBACK", NULL, NULL, NULL);
  return rc;
}

int store_rollups_open(sqlite3 *db, store_rollups_t **out) {
  *out = NULL;
  int existed = 0;
  int rc = sqlite3_create_function(db, "perf_dbin", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, NULL,
                                   sql_dbin, NULL, NULL);
  if (rc == SQLITE_OK) rc = tables_exist(db, &existed);
  if (rc == SQLITE_OK) rc = sqlite3_exec(db, SCHEMA, NULL, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  store_rollups_t *rs = calloc(1, sizeof *rs);
  if (!rs) return SQLITE_NOMEM;
  rs->db = db;
  for (int i = 0; i < RS_COUNT; i++) {
    if ((rc = sqlite3_prepare_v3(db, RS_SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &rs->stmt[i],
                                 NULL)) != SQLITE_OK) {
      store_rollups_close(rs);
      return rc;
    }
  }
  if (!existed && (rc = build_all(rs)) != SQLITE_OK) {
    store_rollups_close(rs);
    return rc;
  }
  *out = rs;
  return SQLITE_OK;
}

void store_rollups_close(store_rollups_t *rs) {
  if (!rs) return;
  for (int i = 0; i < RS_COUNT; i++)
    sqlite3_finalize(rs->stmt[i]);
  free(rs);
}

/* The batch's resource as the rollups keep it. */
static void bind_resource(sqlite3_stmt *s, const store_batch_t *b) {
  sqlite3_bind_text(s, 2, b->app ? b->app : "", -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 3, b->version ? b->version : "", -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, b->environment ? b->environment : "", -1, SQLITE_STATIC);
}

static int put_groups(store_rollups_t *rs, enum rs_stmt id, const store_batch_t *b,
                      const rollup_batch_t *rb) {
  sqlite3_stmt *s = rs->stmt[id];
  for (size_t i = 0; i < rb->n_groups; i++) {
    const rollup_group_row_t *r = &rb->groups[i];
    sqlite3_bind_int64(s, 1, r->bucket_ns);
    bind_resource(s, b);
    sqlite3_bind_text(s, 5, r->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, r->group_sig, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, r->label, -1, SQLITE_STATIC);
    sqlite3_bind_int(s, 8, r->dbin);
    sqlite3_bind_int64(s, 9, r->events);
    sqlite3_bind_int64(s, 10, r->samples);
    sqlite3_bind_int64(s, 11, r->total_ns);
    sqlite3_bind_int64(s, 12, r->first_ns);
    sqlite3_bind_int64(s, 13, r->last_ns);
    sqlite3_bind_int64(s, 14, r->max_ns);
    sqlite3_bind_int64(s, 15, r->cpu_us);
    int rc = run(rs, id);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

static int put_stacks(store_rollups_t *rs, enum rs_stmt id, const store_batch_t *b,
                      const rollup_batch_t *rb) {
  sqlite3_stmt *s = rs->stmt[id];
  for (size_t i = 0; i < rb->n_stacks; i++) {
    const rollup_stack_row_t *r = &rb->stacks[i];
    sqlite3_bind_int64(s, 1, r->bucket_ns);
    bind_resource(s, b);
    sqlite3_bind_text(s, 5, r->kind, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 6, r->group_sig, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 7, r->stack_sig, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 8, r->label, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 9, r->samples);
    sqlite3_bind_int64(s, 10, r->wall_ns);
    sqlite3_bind_int64(s, 11, r->first_ns);
    sqlite3_bind_int64(s, 12, r->last_end_ns);
    sqlite3_bind_int64(s, 13, r->cpu_us);
    int rc = run(rs, id);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

int store_rollups_add_batch(store_rollups_t *rs, const store_batch_t *b, const char *const *group) {
  rollup_batch_t rb;
  if (rollup_batch_build(&rb, b, group, ROLLUP_BUCKET_NS) != 0) return SQLITE_NOMEM;
  int rc = put_groups(rs, RS_ADD_GROUP, b, &rb);
  if (rc == SQLITE_OK) rc = put_stacks(rs, RS_ADD_STACK, b, &rb);
  rollup_batch_free(&rb);
  return rc;
}

/* The statements of order, each in turn, up to the first failure. */
static int run_all(store_rollups_t *rs, const enum rs_stmt *order, size_t n) {
  for (size_t i = 0; i < n; i++) {
    int rc = run(rs, order[i]);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

/* A delta table's shape for a fold: its key's integers (the bucket, then
   dbin for the groups) and texts, its values and how they merge (the
   SQL's sum, min and max), its statements. */
typedef struct fold_shape_s {
  size_t n_ints, n_texts, n_values;
  rollup_merge_t merge[ROLLUP_SUMS_MAX_VALUES];
  enum rs_stmt read, put, put_day;
} fold_shape_t;

static const fold_shape_t FOLD_GROUPS = {
    .n_ints = 2,
    .n_texts = 6,
    .n_values = 7, /* events, samples, total_ns, first_ns, last_ns, max_ns, cpu_us */
    .merge = {ROLLUP_SUM, ROLLUP_SUM, ROLLUP_SUM, ROLLUP_LEAST, ROLLUP_GREATEST, ROLLUP_GREATEST,
              ROLLUP_SUM},
    .read = RS_READ_GROUPS,
    .put = RS_PUT_GROUP,
    .put_day = RS_PUT_GROUP_DAY};
static const fold_shape_t FOLD_STACKS = {
    .n_ints = 1,
    .n_texts = 7,
    .n_values = 5, /* samples, wall_ns, first_ns, last_end_ns, cpu_us */
    .merge = {ROLLUP_SUM, ROLLUP_SUM, ROLLUP_LEAST, ROLLUP_GREATEST, ROLLUP_SUM},
    .read = RS_READ_STACKS,
    .put = RS_PUT_STACK,
    .put_day = RS_PUT_STACK_DAY};

/* The delta rows of shape's table summed per key into sums. */
static int fold_read(store_rollups_t *rs, const fold_shape_t *shape, rollup_sums_t *sums) {
  sqlite3_stmt *s = rs->stmt[shape->read];
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    int64_t ints[ROLLUP_SUMS_MAX_INTS], values[ROLLUP_SUMS_MAX_VALUES];
    const char *text[ROLLUP_SUMS_MAX_TEXTS];
    size_t text_len[ROLLUP_SUMS_MAX_TEXTS];
    int col = 0;
    ints[0] = sqlite3_column_int64(s, col++);
    for (size_t i = 0; i < shape->n_texts; i++, col++) {
      const unsigned char *t = sqlite3_column_text(s, col);
      text[i] = t ? (const char *)t : "";
      text_len[i] = t ? (size_t)sqlite3_column_bytes(s, col) : 0;
    }
    for (size_t i = 1; i < shape->n_ints; i++)
      ints[i] = sqlite3_column_int64(s, col++);
    for (size_t i = 0; i < shape->n_values; i++)
      values[i] = sqlite3_column_int64(s, col++);
    int added = rollup_sums_add(sums, ints, text, text_len, values);
    if (added != 0) {
      rc = added == -1 ? SQLITE_NOMEM : SQLITE_TOOBIG; /* TOOBIG: sum()'s overflow */
      break;
    }
  }
  sqlite3_reset(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* Key k's sums merged into a level by put (bucket_ns its bucket there). */
static int fold_put(store_rollups_t *rs, const fold_shape_t *shape, enum rs_stmt put,
                    const rollup_sum_t *k, int64_t bucket_ns) {
  sqlite3_stmt *s = rs->stmt[put];
  int param = 1;
  sqlite3_bind_int64(s, param++, bucket_ns);
  for (size_t i = 0; i < shape->n_texts; i++)
    sqlite3_bind_text(s, param++, k->text[i], (int)k->text_len[i], SQLITE_STATIC);
  for (size_t i = 1; i < shape->n_ints; i++)
    sqlite3_bind_int64(s, param++, k->ints[i]);
  for (size_t i = 0; i < shape->n_values; i++)
    sqlite3_bind_int64(s, param++, k->values[i]);
  return run(rs, put);
}

/* Shape's delta rows summed in C, not by a GROUP BY (SQLite sorts every
   delta row of the fold for one: most of a fold's time), and each key
   merged into the 10-minute level, then into its day's row (keys of one
   day's buckets merge there in turn: the same sums). */
static int fold_table(store_rollups_t *rs, const fold_shape_t *shape) {
  rollup_sums_t *sums =
      rollup_sums_new(shape->n_ints, shape->n_texts, shape->n_values, shape->merge);
  if (!sums) return SQLITE_NOMEM;
  int rc = fold_read(rs, shape, sums);
  for (size_t i = 0; rc == SQLITE_OK && i < rollup_sums_count(sums); i++) {
    const rollup_sum_t *k = rollup_sums_at(sums, i);
    rc = fold_put(rs, shape, shape->put, k, k->ints[0]);
    if (rc == SQLITE_OK)
      rc = fold_put(rs, shape, shape->put_day, k, rollup_bucket_at(k->ints[0], ROLLUP_DAY_NS));
  }
  sqlite3_clear_bindings(rs->stmt[shape->put]); /* their texts are the sums', freed here */
  sqlite3_clear_bindings(rs->stmt[shape->put_day]);
  rollup_sums_free(sums);
  return rc;
}

int store_rollups_fold(store_rollups_t *rs) {
  int rc = fold_table(rs, &FOLD_GROUPS);
  if (rc == SQLITE_OK) rc = fold_table(rs, &FOLD_STACKS);
  if (rc == SQLITE_OK) rc = run(rs, RS_DELTA_GROUPS_EMPTY);
  if (rc == SQLITE_OK) rc = run(rs, RS_DELTA_STACKS_EMPTY);
  return rc;
}

int store_rollups_mark_before(store_rollups_t *rs, int64_t cutoff_ns) {
  sqlite3_bind_int64(rs->stmt[RS_MARK_BEFORE], 1, cutoff_ns);
  return run(rs, RS_MARK_BEFORE);
}

int store_rollups_mark_resym(store_rollups_t *rs) {
  return run(rs, RS_MARK_RESYM);
}

int store_rollups_rebuild(store_rollups_t *rs) {
  /* The delta rows folded first: the rebuilt buckets' would count twice. */
  int rc = store_rollups_fold(rs);
  if (rc != SQLITE_OK) return rc;
  static const enum rs_stmt order[] = {
      RS_CLEAR_GROUPS, RS_CLEAR_STACKS, RS_DIRTY_HANG,       RS_DIRTY_CPU,
      RS_DIRTY_STACKS, RS_MARK_DAYS,    RS_CLEAR_GROUPS_DAY, RS_CLEAR_STACKS_DAY,
      RS_DAYS_GROUPS,  RS_DAYS_STACKS,  RS_DIRTY_EMPTY,      RS_DIRTY_DAYS_EMPTY};
  return run_all(rs, order, sizeof order / sizeof order[0]);
}
