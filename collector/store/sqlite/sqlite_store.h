/*
 * sqlite_store.h - what the SQLite backend's files share: the connection
 * and its prepared statements (struct store_s, enum stmt_id: the SQL is
 * sqlite_store.c's), the error report, and the ops each file implements:
 * sqlite_store.c opens, ingests, deletes and reports stats, sqlite_query.c
 * reads, sqlite_resym.c renames stored stacks, sqlite_alerts.c keeps alert
 * rules and alerts. Every op takes st->lock.
 */
#ifndef PERF_COLLECTOR_SQLITE_STORE_H
#define PERF_COLLECTOR_SQLITE_STORE_H

#include <pthread.h>
#include <sqlite3.h>
#include <stdbool.h>

#include "collector/store/known_rows.h"
#include "collector/store/query_sql.h"
#include "collector/store/sqlite/db_identity.h"
#include "collector/store/sqlite/sqlite_hang_groups.h"
#include "collector/store/sqlite/sqlite_rollups.h"
#include "collector/store/sqlite/sqlite_states.h"
#include "collector/store/store.h"
#include "sdk/base/worker.h"

enum stmt_id {
  ST_BEGIN,
  ST_COMMIT,
  ST_ROLLBACK,
  ST_INSERT_BATCH,
  ST_INSERT_TAG,
  ST_UPSERT_STACK,
  ST_INSERT_EVENT,
  ST_INSERT_COUNT,
  ST_INSERT_COUNTS,
  ST_COUNT_ROWS,
  ST_UPSERT_GROUP,
  ST_DATA_VERSION,
  ST_INDEX_COUNTS,
  ST_UNINDEXED_BEFORE,
  ST_TOP_HANG,
  ST_TOP_CPU,
  ST_STACK_ROWS,
  ST_EVENT_ROWS,
  ST_EVENT_ONE,
  ST_EVENT_COUNTS,
  ST_DROPS,
  ST_TIME_BUCKETS,
  ST_STATE_ROWS,
  ST_INSERT_LOOP,
  ST_INSERT_LOOP_NAMED,
  ST_LOOP_SUMS,
  ST_LOOP_SUMS_OF_LOOP,
  ST_HANG_COUNT,
  ST_ANY_EVENT,
  ST_STACK_FRAMES,
  ST_GROUP_STACKS,
  ST_COUNT
};

struct store_s {
  pthread_mutex_t lock;
  sqlite3 *db;
  sqlite3_stmt *stmt[ST_COUNT];
  sqlite3_stmt *retention[QSQL_RETENTION_STEPS]; /* query_sql.h's order */
  hang_groups_t *hang;
  store_states_t *states;
  store_rollups_t *rollups;
  /* The stacks and groups rows known stored (known_rows.h), forgotten
     when this connection deletes or moves rows or another connection
     commits (data_version moves). */
  store_known_t *known_stacks, *known_groups;
  sqlite3_int64 data_version;
  char *path;
  db_identity_t *identity;     /* path and path-wal as opened */
  pthread_mutex_t health_lock; /* sqlite_health's own connection (sqlite_health.c) */
  sqlite3 *health;
  uint64_t read_rows_max;   /* store_config_t's, or STORE_READ_ROWS_MAX */
  unsigned fold_interval_s; /* store_config_t's, or STORE_FOLD_INTERVAL_S */
  /* A batch committed rows to the delta tables since the last fold (true
     at open: a collector killed may have left some); under lock. */
  bool unfolded;
  perf__worker_t *fold_worker; /* sqlite_fold.c */
};

/* How long a statement waits for the database's write lock another
   connection holds. */
#define SQLITE_BUSY_TIMEOUT_MS 5000

/* A statement's parameter slots in SQLite's SQL (collector/store/query_sql.h). */
#define SQL_SLOT(n) "?" n
#define SQL_TEXT(n) "?" n
#define SQL_INT(n) "?" n

/* A text column, NULL for SQL NULL. */
static inline const char *column_text(sqlite3_stmt *s, int i) {
  return (const char *)sqlite3_column_text(s, i);
}

/* STORE_OK while the path names the database opened (db_identity.h). */
int sqlite_check(store_t *st, char *why, size_t why_len);

/* GET /healthz (store_ops_t.health): sqlite_check, then the free space
   of the database's file system and whether its write lock can be taken
   within a second, on a connection of its own; the reason in why begins
   with "disk full:", "locked:" or "unavailable:". sqlite_health_close
   closes that connection (at sqlite_close). */
int sqlite_health(store_t *st, char *why, size_t why_len);
void sqlite_health_close(store_t *st);

/* The failed call and SQLite's message, on stderr. */
void sqlite_report(store_t *st, const char *what);

/* Run a prepared statement that returns no rows, then reset it. */
int sqlite_step_done(store_t *st, enum stmt_id id);
/* Forget the stacks and groups known stored (rows are about to be
   deleted or moved); under st->lock. */
void sqlite_forget_known(store_t *st);

/* stack_counts' rows into their index by signature
   (stack_counts_sig_indexed; sqlite_store.c says why it is filled
   apart): sqlite_index_counts inside a write transaction (the fold's, a
   re-symbolization's); sqlite_index_counts_before outside one, in a
   transaction of its own, only when rows of batches received before ns
   wait for it (a read by signature of the batches before ns), and then
   SQLITE_READONLY unless writable (sqlite_check's answer, taken before
   st->lock: a lost database is not written). SQLITE_OK or the error;
   under st->lock. */
int sqlite_index_counts(store_t *st);
int sqlite_index_counts_before(store_t *st, int64_t ns, bool writable);

/* sqlite_fold.c: the thread folding the rollups' delta rows every
   st->fold_interval_s seconds, and once more when stopped. */
int sqlite_fold_start(store_t *st);
void sqlite_fold_stop(store_t *st);

/* sqlite_query.c: store_ops_t's reads. */
int sqlite_top_rows(store_t *st, const store_top_query_t *q, store_row_fn fn, void *user);
int sqlite_stack_rows(store_t *st, const store_top_query_t *q, store_stack_row_fn fn, void *user);
int sqlite_event_rows(store_t *st, const store_top_query_t *q, int64_t limit, store_event_row_fn fn,
                      void *user);
int sqlite_event_detail(store_t *st, int64_t id, store_event_row_fn on_event,
                        store_count_row_fn on_count, void *user);
int sqlite_drops(store_t *st, const store_top_query_t *q, store_drops_t *out);
int sqlite_loop_totals(store_t *st, const store_top_query_t *q, store_loop_totals_t *out);
int sqlite_time_buckets(store_t *st, const store_top_query_t *q, int64_t bucket_ns, int64_t limit,
                        store_bucket_row_fn fn, void *user);
int sqlite_event_states(store_t *st, int64_t id, store_state_row_fn fn, void *user);
int sqlite_state_rows(store_t *st, const store_top_query_t *q, store_state_sum_fn fn, void *user);
int sqlite_group_stacks(store_t *st, const char *const *sigs, size_t n, store_group_stack_fn fn,
                        void *user);

/* sqlite_alerts.c: the alert tables made when missing (SQLITE_OK or the
   error), and store_ops_t's alert ops, app_versions and new_groups. */
int sqlite_alerts_schema(sqlite3 *db);
int sqlite_alert_rule_add(store_t *st, const store_alert_rule_t *rule, int64_t *id);
int sqlite_alert_rule_delete(store_t *st, int64_t id);
int sqlite_alert_rules(store_t *st, store_alert_rule_fn fn, void *user);
int sqlite_alert_claim(store_t *st, const store_alert_t *a, int64_t *id);
int sqlite_alert_update(store_t *st, const store_alert_t *a);
int sqlite_alert_rows(store_t *st, int64_t rule_id, int64_t limit, store_alert_fn fn, void *user);
int sqlite_app_versions(store_t *st, const char *app, store_version_fn fn, void *user);
int sqlite_new_groups(store_t *st, const char *app, int64_t since_ns, int64_t scan_ns,
                      store_new_group_fn fn, void *user);

/* sqlite_resym.c: store_ops_t's resymbolize. */
int sqlite_resymbolize(store_t *st, const char *needle, const store_renamer_t *r,
                       uint64_t *renamed);

#endif
