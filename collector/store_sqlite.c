/*
 * store_sqlite.c - the embedded default storage backend: one SQLite
 * database in WAL mode with a busy timeout, one connection guarded by a
 * mutex (MHD's worker threads put batches, the retention thread deletes),
 * and every statement prepared once at open.
 *
 * Schema: batches (id unique), events of a batch, stacks keyed by the
 * signature of their symbolized frames (first and last seen), and
 * stack_counts (samples of a stack on a thread within an event), groups
 * (the top-stacks API's keys: every stack, and every hang's shared root,
 * referenced by events.group_sig).
 */
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store.h"

#define BUSY_TIMEOUT_MS 5000

static const char SCHEMA[] =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS batches(id BLOB PRIMARY KEY, received_ns INTEGER NOT NULL,"
    " app TEXT, version TEXT, environment TEXT, host TEXT, pid INTEGER);"
    "CREATE INDEX IF NOT EXISTS batches_received ON batches(received_ns);"
    "CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY, batch_id BLOB NOT NULL,"
    " kind TEXT NOT NULL, start_ns INTEGER, duration_ns INTEGER, tid INTEGER,"
    " cpu_percent INTEGER, reason TEXT, dominant_stack_sig TEXT);"
    "CREATE INDEX IF NOT EXISTS events_batch ON events(batch_id);"
    "CREATE TABLE IF NOT EXISTS stacks(signature TEXT PRIMARY KEY, frames TEXT NOT NULL,"
    " first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS stack_counts(event_id INTEGER NOT NULL, stack_sig TEXT NOT NULL,"
    " tid INTEGER, samples INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS stack_counts_event ON stack_counts(event_id);"
    "CREATE INDEX IF NOT EXISTS stack_counts_sig ON stack_counts(stack_sig);"
    "CREATE TABLE IF NOT EXISTS groups(signature TEXT PRIMARY KEY, frames TEXT NOT NULL,"
    " first_seen INTEGER NOT NULL, last_seen INTEGER NOT NULL);";

/* Databases made before the groups: events.group_sig is added when missing
   (the error of an existing column is ignored), then its index. */
static const char ADD_GROUP_SIG[] = "ALTER TABLE events ADD COLUMN group_sig TEXT";
static const char GROUP_SIG_INDEX[] =
    "CREATE INDEX IF NOT EXISTS events_group ON events(group_sig)";

#define TOP_FILTERS                                                                                \
  " AND (?1 IS NULL OR b.app = ?1) AND (?2 IS NULL OR b.version = ?2)"                             \
  " AND (?3 IS NULL OR b.environment = ?3) AND e.start_ns >= ?4 AND e.start_ns <= ?5"

/* ?6: "hang" (hang and fatal_hang) or another kind, exactly. */
#define KIND_FILTER "(e.kind = ?6 OR (?6 = 'hang' AND e.kind = 'fatal_hang'))"
#define EVENT_COLUMNS                                                                              \
  "e.id, e.kind, e.start_ns, e.duration_ns, e.tid, e.cpu_percent, e.reason, b.app, b.version,"     \
  " b.environment, e.group_sig"

enum stmt_id {
  ST_BEGIN,
  ST_COMMIT,
  ST_ROLLBACK,
  ST_INSERT_BATCH,
  ST_UPSERT_STACK,
  ST_INSERT_EVENT,
  ST_INSERT_COUNT,
  ST_DELETE_COUNTS,
  ST_DELETE_EVENTS,
  ST_DELETE_BATCHES,
  ST_DELETE_STACKS,
  ST_COUNT_ROWS,
  ST_UPSERT_GROUP,
  ST_DELETE_GROUPS,
  ST_TOP_HANG,
  ST_TOP_CPU,
  ST_STACK_ROWS,
  ST_EVENT_ROWS,
  ST_EVENT_ONE,
  ST_EVENT_COUNTS,
  ST_COUNT
};

static const char *const STMT_SQL[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_INSERT_BATCH] = "INSERT INTO batches(id, received_ns, app, version, environment, host, pid)"
                        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_UPSERT_STACK] = "INSERT INTO stacks(signature, frames, first_seen, last_seen)"
                        " VALUES(?1, ?2, ?3, ?3) ON CONFLICT(signature) DO UPDATE SET"
                        " last_seen = max(last_seen, excluded.last_seen)",
    [ST_INSERT_EVENT] = "INSERT INTO events(batch_id, kind, start_ns, duration_ns, tid,"
                        " cpu_percent, reason, dominant_stack_sig, group_sig)"
                        " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
    [ST_INSERT_COUNT] =
        "INSERT INTO stack_counts(event_id, stack_sig, tid, samples) VALUES(?1, ?2, ?3, ?4)",
    [ST_DELETE_COUNTS] = "DELETE FROM stack_counts WHERE event_id IN (SELECT e.id FROM events e"
                         " JOIN batches b ON e.batch_id = b.id WHERE b.received_ns < ?1)",
    [ST_DELETE_EVENTS] = "DELETE FROM events WHERE batch_id IN"
                         " (SELECT id FROM batches WHERE received_ns < ?1)",
    [ST_DELETE_BATCHES] = "DELETE FROM batches WHERE received_ns < ?1",
    [ST_DELETE_STACKS] = "DELETE FROM stacks WHERE last_seen < ?1",
    [ST_COUNT_ROWS] = "SELECT (SELECT count(*) FROM batches), (SELECT count(*) FROM events),"
                      " (SELECT count(*) FROM stacks), (SELECT count(*) FROM stack_counts)",
    [ST_UPSERT_GROUP] = "INSERT INTO groups(signature, frames, first_seen, last_seen)"
                        " VALUES(?1, ?2, ?3, ?3) ON CONFLICT(signature) DO UPDATE SET"
                        " last_seen = max(last_seen, excluded.last_seen)",
    [ST_DELETE_GROUPS] = "DELETE FROM groups WHERE last_seen < ?1",
    [ST_TOP_HANG] =
        "SELECT e.group_sig, g.frames, b.version, e.id, e.start_ns, e.duration_ns,"
        " (SELECT coalesce(sum(c.samples), 0) FROM stack_counts c"
        " WHERE c.event_id = e.id)"
        " FROM events e JOIN batches b ON b.id = e.batch_id"
        " JOIN groups g ON g.signature = e.group_sig"
        " WHERE e.kind IN ('hang', 'fatal_hang')" TOP_FILTERS " ORDER BY e.group_sig, e.id",
    [ST_TOP_CPU] = "SELECT c.stack_sig, g.frames, b.version, e.id, e.start_ns, e.duration_ns,"
                   " c.samples FROM stack_counts c JOIN events e ON e.id = c.event_id"
                   " JOIN batches b ON b.id = e.batch_id JOIN groups g ON g.signature = c.stack_sig"
                   " WHERE e.kind = 'cpu'" TOP_FILTERS " ORDER BY c.stack_sig, e.id",
    [ST_STACK_ROWS] =
        "SELECT c.stack_sig, s.frames, sum(c.samples),"
        " coalesce(sum(c.samples * CAST(e.duration_ns AS REAL) /"
        " (SELECT sum(x.samples) FROM stack_counts x WHERE x.event_id = e.id)), 0),"
        " min(e.start_ns), max(e.start_ns + e.duration_ns) FROM stack_counts c"
        " JOIN events e ON e.id = c.event_id JOIN batches b ON b.id = e.batch_id"
        " JOIN stacks s ON s.signature = c.stack_sig"
        " WHERE " KIND_FILTER TOP_FILTERS " GROUP BY c.stack_sig ORDER BY c.stack_sig",
    [ST_EVENT_ROWS] = "SELECT " EVENT_COLUMNS " FROM events e JOIN batches b ON b.id = e.batch_id"
                      " WHERE (?6 IS NULL OR " KIND_FILTER ")" TOP_FILTERS
                      " ORDER BY e.start_ns DESC, e.id DESC LIMIT ?7",
    [ST_EVENT_ONE] = "SELECT " EVENT_COLUMNS " FROM events e JOIN batches b ON b.id = e.batch_id"
                     " WHERE e.id = ?1",
    [ST_EVENT_COUNTS] = "SELECT c.stack_sig, s.frames, c.tid, c.samples FROM stack_counts c"
                        " LEFT JOIN stacks s ON s.signature = c.stack_sig WHERE c.event_id = ?1"
                        " ORDER BY c.samples DESC, c.rowid",
};

struct store_s {
  pthread_mutex_t lock;
  sqlite3 *db;
  sqlite3_stmt *stmt[ST_COUNT];
  char *path;
};

static void report(store_t *st, const char *what) {
  fprintf(stderr, "perf-collector: sqlite %s: %s\n", what, sqlite3_errmsg(st->db));
}

/* Run a prepared statement that returns no rows, then reset it. */
static int step_done(store_t *st, enum stmt_id id) {
  sqlite3_stmt *s = st->stmt[id];
  int rc = sqlite3_step(s);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static void sqlite_close(store_t *st) {
  if (!st) return;
  for (int i = 0; i < ST_COUNT; i++)
    sqlite3_finalize(st->stmt[i]);
  sqlite3_close(st->db);
  pthread_mutex_destroy(&st->lock);
  free(st->path);
  free(st);
}

static int prepare_all(store_t *st) {
  for (int i = 0; i < ST_COUNT; i++) {
    if (sqlite3_prepare_v3(st->db, STMT_SQL[i], -1, SQLITE_PREPARE_PERSISTENT, &st->stmt[i],
                           NULL) != SQLITE_OK) {
      report(st, "prepare");
      return STORE_ERROR;
    }
  }
  return STORE_OK;
}

static int sqlite_open(const char *path, store_t **out) {
  *out = NULL;
  store_t *st = calloc(1, sizeof *st);
  if (!st || !(st->path = strdup(path))) {
    free(st);
    return STORE_ERROR;
  }
  pthread_mutex_init(&st->lock, NULL);
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path, &st->db, flags, NULL) != SQLITE_OK) {
    report(st, "open");
    sqlite_close(st);
    return STORE_ERROR;
  }
  sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
  char *err = NULL;
  if (sqlite3_exec(st->db, SCHEMA, NULL, NULL, &err) != SQLITE_OK) {
    fprintf(stderr, "perf-collector: sqlite schema: %s\n", err ? err : "?");
    sqlite3_free(err);
    sqlite_close(st);
    return STORE_ERROR;
  }
  sqlite3_exec(st->db, ADD_GROUP_SIG, NULL, NULL, NULL); /* fails when present: fine */
  if (sqlite3_exec(st->db, GROUP_SIG_INDEX, NULL, NULL, NULL) != SQLITE_OK) {
    report(st, "schema");
    sqlite_close(st);
    return STORE_ERROR;
  }
  if (prepare_all(st) != STORE_OK) {
    sqlite_close(st);
    return STORE_ERROR;
  }
  *out = st;
  return STORE_OK;
}

static int insert_batch_row(store_t *st, const store_batch_t *b) {
  sqlite3_stmt *s = st->stmt[ST_INSERT_BATCH];
  sqlite3_bind_blob(s, 1, b->id, STORE_BATCH_ID_BYTES, SQLITE_STATIC);
  sqlite3_bind_int64(s, 2, b->received_ns);
  sqlite3_bind_text(s, 3, b->app, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 4, b->version, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 5, b->environment, -1, SQLITE_STATIC);
  sqlite3_bind_text(s, 6, b->host, -1, SQLITE_STATIC);
  sqlite3_bind_int64(s, 7, b->pid);
  return step_done(st, ST_INSERT_BATCH);
}

static int upsert_stacks(store_t *st, const store_batch_t *b) {
  sqlite3_stmt *s = st->stmt[ST_UPSERT_STACK];
  for (size_t i = 0; i < b->n_stacks; i++) {
    sqlite3_bind_text(s, 1, b->stacks[i].signature, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, b->stacks[i].frames_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, b->received_ns);
    int rc = step_done(st, ST_UPSERT_STACK);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

static int upsert_groups(store_t *st, const store_batch_t *b) {
  sqlite3_stmt *s = st->stmt[ST_UPSERT_GROUP];
  for (size_t i = 0; i < b->n_groups; i++) {
    sqlite3_bind_text(s, 1, b->groups[i].signature, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, b->groups[i].names_json, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, b->received_ns);
    int rc = step_done(st, ST_UPSERT_GROUP);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

static int insert_counts(store_t *st, sqlite3_int64 event_id, const store_event_t *e) {
  sqlite3_stmt *s = st->stmt[ST_INSERT_COUNT];
  for (size_t i = 0; i < e->n_counts; i++) {
    sqlite3_bind_int64(s, 1, event_id);
    sqlite3_bind_text(s, 2, e->counts[i].stack_sig, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, e->counts[i].tid);
    sqlite3_bind_int64(s, 4, e->counts[i].samples);
    int rc = step_done(st, ST_INSERT_COUNT);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

static int insert_events(store_t *st, const store_batch_t *b) {
  sqlite3_stmt *s = st->stmt[ST_INSERT_EVENT];
  for (size_t i = 0; i < b->n_events; i++) {
    const store_event_t *e = &b->events[i];
    sqlite3_bind_blob(s, 1, b->id, STORE_BATCH_ID_BYTES, SQLITE_STATIC);
    sqlite3_bind_text(s, 2, e->kind, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 3, e->start_ns);
    sqlite3_bind_int64(s, 4, e->duration_ns);
    sqlite3_bind_int64(s, 5, e->tid);
    sqlite3_bind_int64(s, 6, e->cpu_percent);
    sqlite3_bind_text(s, 7, e->reason, -1, SQLITE_STATIC);
    if (e->dominant_stack_sig)
      sqlite3_bind_text(s, 8, e->dominant_stack_sig, -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(s, 8);
    if (e->group_sig)
      sqlite3_bind_text(s, 9, e->group_sig, -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(s, 9);
    int rc = step_done(st, ST_INSERT_EVENT);
    if (rc == SQLITE_OK) rc = insert_counts(st, sqlite3_last_insert_rowid(st->db), e);
    if (rc != SQLITE_OK) return rc;
  }
  return SQLITE_OK;
}

static int put_batch_locked(store_t *st, const store_batch_t *b) {
  if (step_done(st, ST_BEGIN) != SQLITE_OK) {
    report(st, "begin");
    return STORE_ERROR;
  }
  int rc = insert_batch_row(st, b);
  if (rc == SQLITE_CONSTRAINT) {
    step_done(st, ST_ROLLBACK);
    return STORE_DUPLICATE;
  }
  if (rc == SQLITE_OK) rc = upsert_stacks(st, b);
  if (rc == SQLITE_OK) rc = upsert_groups(st, b);
  if (rc == SQLITE_OK) rc = insert_events(st, b);
  if (rc == SQLITE_OK) rc = step_done(st, ST_COMMIT);
  if (rc == SQLITE_OK) return STORE_OK;
  report(st, "put batch");
  step_done(st, ST_ROLLBACK);
  return STORE_ERROR;
}

static int sqlite_put_batch(store_t *st, const store_batch_t *b) {
  pthread_mutex_lock(&st->lock);
  int rc = put_batch_locked(st, b);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static int delete_locked(store_t *st, int64_t cutoff_ns, uint64_t *deleted) {
  static const enum stmt_id order[] = {ST_DELETE_COUNTS, ST_DELETE_EVENTS, ST_DELETE_BATCHES,
                                       ST_DELETE_STACKS, ST_DELETE_GROUPS};
  if (step_done(st, ST_BEGIN) != SQLITE_OK) return STORE_ERROR;
  for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
    sqlite3_bind_int64(st->stmt[order[i]], 1, cutoff_ns);
    if (step_done(st, order[i]) != SQLITE_OK) {
      report(st, "retention");
      step_done(st, ST_ROLLBACK);
      return STORE_ERROR;
    }
    if (order[i] == ST_DELETE_BATCHES && deleted) *deleted = (uint64_t)sqlite3_changes(st->db);
  }
  return step_done(st, ST_COMMIT) == SQLITE_OK ? STORE_OK : STORE_ERROR;
}

static int sqlite_delete_older_than(store_t *st, int64_t cutoff_ns, uint64_t *deleted) {
  if (deleted) *deleted = 0;
  pthread_mutex_lock(&st->lock);
  int rc = delete_locked(st, cutoff_ns, deleted);
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static uint64_t file_bytes(const char *path, const char *suffix) {
  char name[4096];
  struct stat sb;
  if (snprintf(name, sizeof name, "%s%s", path, suffix) >= (int)sizeof name) return 0;
  return stat(name, &sb) == 0 ? (uint64_t)sb.st_size : 0;
}

static int sqlite_stats(store_t *st, store_stats_t *out) {
  memset(out, 0, sizeof *out);
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_COUNT_ROWS];
  int rc = sqlite3_step(s);
  if (rc == SQLITE_ROW) {
    out->batches = (uint64_t)sqlite3_column_int64(s, 0);
    out->events = (uint64_t)sqlite3_column_int64(s, 1);
    out->stacks = (uint64_t)sqlite3_column_int64(s, 2);
    out->stack_counts = (uint64_t)sqlite3_column_int64(s, 3);
  }
  sqlite3_reset(s);
  pthread_mutex_unlock(&st->lock);
  out->db_bytes = file_bytes(st->path, "") + file_bytes(st->path, "-wal");
  return rc == SQLITE_ROW ? STORE_OK : STORE_ERROR;
}

static const char *column_text(sqlite3_stmt *s, int i) {
  return (const char *)sqlite3_column_text(s, i);
}

static int sqlite_top_rows(store_t *st, const store_top_query_t *q, store_row_fn fn, void *user) {
  enum stmt_id id = strcmp(q->kind, "cpu") == 0 ? ST_TOP_CPU : ST_TOP_HANG;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[id];
  const char *filters[3] = {q->app, q->version, q->environment};
  for (int i = 0; i < 3; i++)
    if (filters[i])
      sqlite3_bind_text(s, i + 1, filters[i], -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(s, i + 1);
  sqlite3_bind_int64(s, 4, q->from_ns);
  sqlite3_bind_int64(s, 5, q->to_ns);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_top_row_t row = {column_text(s, 0),
                           column_text(s, 1),
                           column_text(s, 2),
                           sqlite3_column_int64(s, 3),
                           sqlite3_column_int64(s, 4),
                           sqlite3_column_int64(s, 5),
                           (uint64_t)sqlite3_column_int64(s, 6)};
    if (!row.group_sig || !row.names_json) continue;
    stopped = fn(&row, user);
  }
  if (!stopped && rc != SQLITE_DONE) report(st, "top rows");
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  pthread_mutex_unlock(&st->lock);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

static void bind_filters(sqlite3_stmt *s, const store_top_query_t *q) {
  const char *filters[3] = {q->app, q->version, q->environment};
  for (int i = 0; i < 3; i++)
    if (filters[i])
      sqlite3_bind_text(s, i + 1, filters[i], -1, SQLITE_STATIC);
    else
      sqlite3_bind_null(s, i + 1);
  sqlite3_bind_int64(s, 4, q->from_ns);
  sqlite3_bind_int64(s, 5, q->to_ns);
  if (q->kind)
    sqlite3_bind_text(s, 6, q->kind, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(s, 6);
}

/* Step s to the end (or until fn stops), then reset it; the lock is held. */
static int finish_scan(store_t *st, sqlite3_stmt *s, int rc, int stopped, const char *what) {
  if (!stopped && rc != SQLITE_DONE) report(st, what);
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

static int sqlite_stack_rows(store_t *st, const store_top_query_t *q, store_stack_row_fn fn,
                             void *user) {
  if (!q->kind) return STORE_ERROR;
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_STACK_ROWS];
  bind_filters(s, q);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_stack_row_t row = {column_text(s, 0),
                             column_text(s, 1),
                             (uint64_t)sqlite3_column_int64(s, 2),
                             sqlite3_column_double(s, 3),
                             sqlite3_column_int64(s, 4),
                             sqlite3_column_int64(s, 5)};
    if (!row.stack_sig || !row.frames_json) continue;
    stopped = fn(&row, user);
  }
  rc = finish_scan(st, s, rc, stopped, "stack rows");
  pthread_mutex_unlock(&st->lock);
  return rc;
}

static store_event_row_t event_row(sqlite3_stmt *s) {
  store_event_row_t row = {.id = sqlite3_column_int64(s, 0),
                           .kind = column_text(s, 1),
                           .start_ns = sqlite3_column_int64(s, 2),
                           .duration_ns = sqlite3_column_int64(s, 3),
                           .tid = (uint32_t)sqlite3_column_int64(s, 4),
                           .cpu_percent = (int32_t)sqlite3_column_int64(s, 5),
                           .reason = column_text(s, 6),
                           .app = column_text(s, 7),
                           .version = column_text(s, 8),
                           .environment = column_text(s, 9),
                           .group_sig = column_text(s, 10)};
  return row;
}

static int sqlite_event_rows(store_t *st, const store_top_query_t *q, int64_t limit,
                             store_event_row_fn fn, void *user) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = st->stmt[ST_EVENT_ROWS];
  bind_filters(s, q);
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

static int sqlite_event_detail(store_t *st, int64_t id, store_event_row_fn on_event,
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
      store_count_row_t row = {column_text(s, 0), column_text(s, 1),
                               (uint32_t)sqlite3_column_int64(s, 2),
                               (uint64_t)sqlite3_column_int64(s, 3)};
      if (!row.stack_sig) continue;
      stopped = on_count(&row, user);
    }
    rc = finish_scan(st, s, step, stopped, "event counts");
  }
  pthread_mutex_unlock(&st->lock);
  if (rc == STORE_OK && !found) return STORE_NOT_FOUND;
  return rc;
}

const store_ops_t store_sqlite_ops = {
    .name = "sqlite",
    .open = sqlite_open,
    .close = sqlite_close,
    .put_batch = sqlite_put_batch,
    .delete_older_than = sqlite_delete_older_than,
    .stats = sqlite_stats,
    .top_rows = sqlite_top_rows,
    .stack_rows = sqlite_stack_rows,
    .event_rows = sqlite_event_rows,
    .event_detail = sqlite_event_detail,
};
