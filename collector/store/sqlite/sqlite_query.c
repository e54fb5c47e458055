/*
 * sqlite_query.c - the SQLite backend's reads (store_ops_t's top_rows ...
 * group_stacks): the query's filters bound to the prepared statements of
 * sqlite_store.c, from the rollups where they answer (rollup.h), rows
 * decoded and streamed to the caller under the connection's lock.
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/hang_group_cands.h"
#include "collector/model/rollup.h"
#include "collector/model/rollup_batch.h"
#include "collector/store/query_params.h"
#include "collector/store/rollup_sql.h"
#include "collector/store/rows.h"
#include "collector/store/sqlite/sqlite_store.h"

/* The columns of the row a statement stepped to (rows.h). */
static const char *col_text(const void *row, int col) {
  return column_text((sqlite3_stmt *)row, col);
}

static int64_t col_i64(const void *row, int col) {
  return sqlite3_column_int64((sqlite3_stmt *)row, col);
}

static bool col_null(const void *row, int col) {
  return sqlite3_column_type((sqlite3_stmt *)row, col) == SQLITE_NULL;
}

static store_columns_t columns(sqlite3_stmt *s) {
  return (store_columns_t){s, col_text, col_i64, col_null};
}

static void bind_text(void *stmt, int slot, const char *text, size_t len) {
  if (text)
    sqlite3_bind_text(stmt, slot, text, (int)len, SQLITE_STATIC);
  else
    sqlite3_bind_null(stmt, slot);
}

static void bind_i64(void *stmt, int slot, int64_t value) {
  sqlite3_bind_int64(stmt, slot, value);
}

/* q's filters into their slots (query_params.h), and the rows a bounded
   read sums (a statement without ?31 ignores it). */
static void bind_filters(store_t *st, sqlite3_stmt *s, const store_top_query_t *q) {
  store_binder_t b = {s, bind_text, bind_i64};
  store_bind_filters(&b, q);
  store_bind_rows(&b, st->read_rows_max);
}

/* rollup_plan's probe: does an event start in [lo, hi]? The lock is held. */
static int any_event(void *ctx, int64_t lo, int64_t hi) {
  store_t *st = ctx;
  sqlite3_stmt *s = st->stmt[ST_ANY_EVENT];
  sqlite3_bind_int64(s, 1, lo);
  sqlite3_bind_int64(s, 2, hi);
  int rc = sqlite3_step(s), any = rc == SQLITE_ROW ? sqlite3_column_int(s, 0) : -1;
  sqlite3_reset(s);
  return any;
}

/* q's plan (rollup.h) into ?20..?29 of s; the lock is held. */
static void bind_plan(store_t *st, sqlite3_stmt *s, const store_top_query_t *q) {
  rollup_plan_t plan;
  rollup_plan(q, any_event, st, &plan);
  store_binder_t b = {s, bind_text, bind_i64};
  store_bind_plan(&b, &plan);
}

int sqlite_top_rows(store_t *st, const store_top_query_t *q, store_row_fn fn, void *user) {
  enum stmt_id id = store_kind_cpu_time(q->kind) ? ST_TOP_CPU : ST_TOP_HANG;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[id];
  bind_filters(st, s, q);
  bind_plan(st, s, q);
  int rc, stopped = 0;
  store_columns_t cols = columns(s);
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_top_row_t row = store_top_row(&cols);
    row.rows_limit = st->read_rows_max;
    if (id == ST_TOP_HANG)
      row.majority_len =
          hang_groups_majority_len(sqlite3_column_blob(s, STORE_TOP_PATH_COLUMN),
                                   (size_t)sqlite3_column_bytes(s, STORE_TOP_PATH_COLUMN));
    if (!row.group_sig || !row.names_json) continue;
    stopped = fn(&row, user);
  }
  if (!stopped && rc != SQLITE_DONE) sqlite_report(st, "top rows");
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  pthread_mutex_unlock(&st->lock);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

/* Step s to the end (or until fn stops), then reset it; the lock is held. */
static int finish_scan(store_t *st, sqlite3_stmt *s, int rc, int stopped, const char *what) {
  if (!stopped && rc != SQLITE_DONE) sqlite_report(st, what);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

int sqlite_stack_rows(store_t *st, const store_top_query_t *q, store_stack_row_fn fn, void *user) {
  if (!q->kind) return STORE_ERROR;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_STACK_ROWS];
  bind_filters(st, s, q);
  bind_plan(st, s, q);
  if (q->group) sqlite3_bind_text(s, 8, q->group, -1, SQLITE_STATIC);
  int rc, stopped = 0;
  store_columns_t cols = columns(s);
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_stack_row_t row = store_stack_row(&cols);
    row.rows_limit = st->read_rows_max;
    if (!store_stack_row_usable(&row)) continue;
    stopped = fn(&row, user);
  }
  rc = finish_scan(st, s, rc, stopped, "stack rows");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static store_event_row_t event_row(sqlite3_stmt *s) {
  store_columns_t cols = columns(s);
  return store_event_row(&cols, 0);
}

int sqlite_event_rows(store_t *st, const store_top_query_t *q, int64_t limit, store_event_row_fn fn,
                      void *user) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_EVENT_ROWS];
  bind_filters(st, s, q);
  sqlite3_bind_int64(s, 7, limit);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_event_row_t row = event_row(s);
    stopped = fn(&row, user);
  }
  rc = finish_scan(st, s, rc, stopped, "event rows");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

int sqlite_event_detail(store_t *st, int64_t id, store_event_row_fn on_event,
                        store_count_row_fn on_count, void *user) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_EVENT_ONE];
  sqlite3_bind_int64(s, 1, id);
  int rc = sqlite3_step(s), stopped = 0, found = rc == SQLITE_ROW;
  if (found) {
    store_event_row_t row = event_row(s);
    stopped = on_event(&row, user);
    rc = SQLITE_DONE;
  }
  rc = finish_scan(st, s, rc, stopped, "event");
  if (rc == STORE_OK && found) {
    s = st->stmt[ST_EVENT_COUNTS];
    sqlite3_bind_int64(s, 1, id);
    int step = SQLITE_DONE;
    while (!stopped && (step = sqlite3_step(s)) == SQLITE_ROW) {
      store_columns_t cols = columns(s);
      store_count_row_t row = store_count_row(&cols);
      if (!row.stack_sig) continue;
      stopped = on_count(&row, user);
    }
    rc = finish_scan(st, s, step, stopped, "event counts");
  }
  pthread_mutex_unlock(&st->lock);
  if (rc == STORE_OK && !found) return STORE_NOT_FOUND;
  return rc;
}

int sqlite_drops(store_t *st, const store_top_query_t *q, store_drops_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_DROPS];
  bind_filters(st, s, q);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    for (int i = 0; i < STORE_DROP_COUNT; i++)
      out->dropped[i] = (uint64_t)sqlite3_column_int64(s, i);
    out->batches = (uint64_t)sqlite3_column_int64(s, STORE_DROP_COUNT);
    out->rows_limit = st->read_rows_max;
    rc = SQLITE_DONE;
  }
  rc = finish_scan(st, s, rc, 0, "drops");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

/* Two scans under one lock: the loop stats (by the batches' arrival; of
   q->loop only when it names one) and the hang count (by the events'
   start). */
int sqlite_loop_totals(store_t *st, const store_top_query_t *q, store_loop_totals_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[q->loop ? ST_LOOP_SUMS_OF_LOOP : ST_LOOP_SUMS];
  bind_filters(st, s, q);
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    out->sum.watched_ns = (uint64_t)sqlite3_column_double(s, 0);
    out->sum.busy_ns = (uint64_t)sqlite3_column_double(s, 1);
    for (int i = 0; i < STORE_LOOP_BUCKETS; i++)
      out->sum.units[i] = (uint64_t)sqlite3_column_double(s, 2 + i);
    out->batches = (uint64_t)sqlite3_column_int64(s, 2 + STORE_LOOP_BUCKETS);
    out->rows_limit = st->read_rows_max;
    rc = SQLITE_DONE;
  }
  rc = finish_scan(st, s, rc, 0, "loop stats");
  if (rc == STORE_OK) {
    s = st->stmt[ST_HANG_COUNT];
    bind_filters(st, s, q);
    rc = sqlite3_step(s);
    if (rc == SQLITE_ROW) {
      out->hangs = (uint64_t)sqlite3_column_int64(s, 0);
      rc = SQLITE_DONE;
    }
    rc = finish_scan(st, s, rc, 0, "hang count");
  }
  pthread_mutex_unlock(&st->lock);
  return rc;
}

int sqlite_time_buckets(store_t *st, const store_top_query_t *q, int64_t bucket_ns, int64_t limit,
                        store_bucket_row_fn fn, void *user) {
  if (!q->kind || bucket_ns <= 0) return STORE_ERROR;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_TIME_BUCKETS];
  bind_filters(st, s, q);
  sqlite3_bind_int64(s, 7, bucket_ns);
  sqlite3_bind_int64(s, 8, limit);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_bucket_row_t row = {sqlite3_column_int64(s, 0) * bucket_ns,
                              (uint64_t)sqlite3_column_int64(s, 1), sqlite3_column_double(s, 2),
                              st->read_rows_max};
    stopped = fn(&row, user);
  }
  rc = finish_scan(st, s, rc, stopped, "time buckets");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

int sqlite_event_states(store_t *st, int64_t id, store_state_row_fn fn, void *user) {
  pthread_mutex_lock(&st->lock);
  int rc = store_states_of_event(st->states, id, fn, user);
  if (rc != STORE_OK) sqlite_report(st, "event states");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

int sqlite_state_rows(store_t *st, const store_top_query_t *q, store_state_sum_fn fn, void *user) {
  if (!q->kind) return STORE_ERROR;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_STATE_ROWS];
  bind_filters(st, s, q);
  if (q->group) sqlite3_bind_text(s, 8, q->group, -1, SQLITE_STATIC);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_state_sum_t row = {{0, column_text(s, 0), column_text(s, 1), column_text(s, 2),
                              (uint64_t)sqlite3_column_int64(s, 3)},
                             (uint64_t)sqlite3_column_int64(s, 4),
                             st->read_rows_max};
    stopped = fn(&row, user);
  }
  rc = finish_scan(st, s, rc, stopped, "state rows");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

/* The rows of statement id for sig to fn(i, ...) until it has enough;
   1 when it had, 0 when not, -1 on failure. The lock is held. */
static int group_rows(store_t *st, enum stmt_id id, const char *sig, size_t i,
                      store_group_stack_fn fn, void *user) {
  sqlite3_stmt *s = st->stmt[id];
  sqlite3_bind_text(s, 1, sig, -1, SQLITE_STATIC);
  int step, enough = 0;
  while (!enough && (step = sqlite3_step(s)) == SQLITE_ROW) {
    const char *frames = column_text(s, 0);
    if (frames) enough = fn(i, frames, user) != 0;
  }
  int rc = finish_scan(st, s, enough ? SQLITE_DONE : step, 0, "group stacks");
  return rc != STORE_OK ? -1 : enough;
}

int sqlite_group_stacks(store_t *st, const char *const *sigs, size_t n, store_group_stack_fn fn,
                        void *user) {
  pthread_mutex_lock(&st->lock);
  int rc = 0;
  for (size_t i = 0; rc >= 0 && i < n; i++) {
    rc = group_rows(st, ST_STACK_FRAMES, sigs[i], i, fn, user);
    if (rc == 0) rc = group_rows(st, ST_GROUP_STACKS, sigs[i], i, fn, user);
  }
  pthread_mutex_unlock(&st->lock);
  return rc < 0 ? STORE_ERROR : STORE_OK;
}
