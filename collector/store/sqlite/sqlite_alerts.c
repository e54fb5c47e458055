/*
 * sqlite_alerts.c - the SQLite store's alert rules and alerts (store.h
 * alert_rule_add .. new_groups; the SQL is alert_sql.h's): the tables,
 * made when missing (an older database gains them at open), and the ops,
 * each under st->lock on the store's connection. Called from the HTTP
 * workers (the rules' routes) and the alert thread (collector/alerts/).
 */
#include <stdlib.h>

#include "collector/base/log.h"
#include "collector/store/alert_sql.h"
#include "collector/store/sqlite/sqlite_store.h"

static const char SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS alert_rules(id INTEGER PRIMARY KEY, kind TEXT NOT NULL,"
    " url TEXT NOT NULL, format TEXT NOT NULL, app TEXT, event_kind TEXT,"
    " created_ns INTEGER NOT NULL);"
    "CREATE TABLE IF NOT EXISTS alerts(id INTEGER PRIMARY KEY, rule_id INTEGER NOT NULL,"
    " alert_key TEXT NOT NULL, state TEXT NOT NULL, status INTEGER NOT NULL,"
    " attempts INTEGER NOT NULL, time_ns INTEGER NOT NULL, summary TEXT NOT NULL,"
    " link TEXT NOT NULL, UNIQUE(rule_id, alert_key));"
    "CREATE INDEX IF NOT EXISTS alerts_time ON alerts(time_ns);";

int sqlite_alerts_schema(sqlite3 *db) {
  return sqlite3_exec(db, SCHEMA, NULL, NULL, NULL);
}

/* sql prepared on st's connection (the lock held), NULL when it failed (said). */
static sqlite3_stmt *prepare(store_t *st, const char *sql) {
  sqlite3_stmt *s = NULL;
  if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
    sqlite_report(st, "alerts: prepare");
    return NULL;
  }
  return s;
}

static void bind_text(sqlite3_stmt *s, int i, const char *text) {
  if (text)
    sqlite3_bind_text(s, i, text, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(s, i);
}

/* A statement of at most one row: *id its first column when it gave one
   (found set). STORE_OK or STORE_ERROR (said). */
static int step_one(store_t *st, sqlite3_stmt *s, int64_t *id, bool *found) {
  int rc = sqlite3_step(s);
  *found = rc == SQLITE_ROW;
  if (*found && id) *id = sqlite3_column_int64(s, 0);
  if (*found) rc = sqlite3_step(s);
  if (rc != SQLITE_DONE) sqlite_report(st, "alerts");
  sqlite3_finalize(s);
  return rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

int sqlite_alert_rule_add(store_t *st, const store_alert_rule_t *rule, int64_t *id) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = prepare(st, ASQL_RULE_ADD);
  int rc = STORE_ERROR;
  bool found = false;
  if (s) {
    bind_text(s, 1, rule->kind);
    bind_text(s, 2, rule->url);
    bind_text(s, 3, rule->format);
    bind_text(s, 4, rule->app);
    bind_text(s, 5, rule->event_kind);
    sqlite3_bind_int64(s, 6, rule->created_ns);
    rc = step_one(st, s, id, &found);
  }
  pthread_mutex_unlock(&st->lock);
  return rc == STORE_OK && !found ? STORE_ERROR : rc;
}

int sqlite_alert_rule_delete(store_t *st, int64_t id) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = prepare(st, ASQL_RULE_DELETE);
  int rc = STORE_ERROR;
  bool found = false;
  if (s) {
    sqlite3_bind_int64(s, 1, id);
    rc = step_one(st, s, NULL, &found);
  }
  pthread_mutex_unlock(&st->lock);
  return rc == STORE_OK && !found ? STORE_NOT_FOUND : rc;
}

int sqlite_alert_rules(store_t *st, store_alert_rule_fn fn, void *user) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = prepare(st, ASQL_RULES);
  int rc = SQLITE_ERROR, stopped = 0;
  while (s && !stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_alert_rule_t r = {sqlite3_column_int64(s, 0), column_text(s, 1), column_text(s, 2),
                            column_text(s, 3),          column_text(s, 4), column_text(s, 5),
                            sqlite3_column_int64(s, 6)};
    stopped = fn(&r, user);
  }
  sqlite3_finalize(s);
  pthread_mutex_unlock(&st->lock);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

int sqlite_alert_claim(store_t *st, const store_alert_t *a, int64_t *id) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = prepare(st, ASQL_CLAIM);
  int rc = STORE_ERROR;
  bool found = false;
  if (s) {
    sqlite3_bind_int64(s, 1, a->rule_id);
    bind_text(s, 2, a->alert_key);
    bind_text(s, 3, a->state);
    sqlite3_bind_int64(s, 4, a->time_ns);
    bind_text(s, 5, a->summary);
    bind_text(s, 6, a->link);
    rc = step_one(st, s, id, &found);
  }
  pthread_mutex_unlock(&st->lock);
  return rc == STORE_OK && !found ? STORE_DUPLICATE : rc;
}

int sqlite_alert_update(store_t *st, const store_alert_t *a) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = prepare(st, ASQL_UPDATE);
  int rc = STORE_ERROR;
  bool found = false;
  if (s) {
    sqlite3_bind_int64(s, 1, a->id);
    bind_text(s, 2, a->state);
    sqlite3_bind_int64(s, 3, a->status);
    sqlite3_bind_int64(s, 4, a->attempts);
    sqlite3_bind_int64(s, 5, a->time_ns);
    rc = step_one(st, s, NULL, &found);
  }
  pthread_mutex_unlock(&st->lock);
  return rc;
}

int sqlite_alert_rows(store_t *st, int64_t rule_id, int64_t limit, store_alert_fn fn, void *user) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = prepare(st, ASQL_ROWS);
  int rc = SQLITE_ERROR, stopped = 0;
  if (s) sqlite3_bind_int64(s, 1, rule_id), sqlite3_bind_int64(s, 2, limit);
  while (s && !stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_alert_t a = {
        sqlite3_column_int64(s, 0), sqlite3_column_int64(s, 1), column_text(s, 2),
        column_text(s, 3),          sqlite3_column_int64(s, 4), sqlite3_column_int64(s, 5),
        sqlite3_column_int64(s, 6), column_text(s, 7),          column_text(s, 8)};
    stopped = fn(&a, user);
  }
  sqlite3_finalize(s);
  pthread_mutex_unlock(&st->lock);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

int sqlite_app_versions(store_t *st, const char *app, store_version_fn fn, void *user) {
  pthread_mutex_lock(&st->lock);
  sqlite3_stmt *s = prepare(st, ASQL_APP_VERSIONS);
  int rc = SQLITE_ERROR, stopped = 0;
  if (s) bind_text(s, 1, app);
  while (s && !stopped && (rc = sqlite3_step(s)) == SQLITE_ROW)
    stopped = fn(column_text(s, 0), sqlite3_column_int64(s, 1), user);
  sqlite3_finalize(s);
  pthread_mutex_unlock(&st->lock);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}

int sqlite_new_groups(store_t *st, const char *app, int64_t since_ns, int64_t scan_ns,
                      store_new_group_fn fn, void *user) {
  char why[64];
  bool writable = sqlite_check(st, why, sizeof why) == STORE_OK;
  pthread_mutex_lock(&st->lock);
  /* The stack counts of batches before since_ns all in their index by
     signature (sqlite_store.h): as a rule the fold put them there. */
  int indexed = sqlite_index_counts_before(st, since_ns, writable);
  if (indexed != SQLITE_OK) {
    if (indexed == SQLITE_READONLY)
      collector_log("new groups: %s; its stack counts not indexed yet are not read\n", why);
    else
      sqlite_report(st, "new groups: indexing the stack counts");
    pthread_mutex_unlock(&st->lock);
    return STORE_ERROR;
  }
  sqlite3_stmt *s = prepare(st, ASQL_NEW_GROUPS(" AND oc.sig_indexed = 1"));
  int rc = SQLITE_ERROR, stopped = 0;
  if (s)
    bind_text(s, 1, app), sqlite3_bind_int64(s, 2, since_ns), sqlite3_bind_int64(s, 3, scan_ns);
  while (s && !stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_new_group_t g = {column_text(s, 0), column_text(s, 1), column_text(s, 2),
                           sqlite3_column_int64(s, 3)};
    stopped = fn(&g, user);
  }
  sqlite3_finalize(s);
  pthread_mutex_unlock(&st->lock);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}
