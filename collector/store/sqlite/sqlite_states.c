/*
 * sqlite_states.c - thread states in SQLite (see sqlite_states.h). The
 * aggregate over a query's events is sqlite_store.c's (it shares the
 * query's filters there).
 */
#include "collector/store/sqlite/sqlite_states.h"

#include <stdio.h>
#include <stdlib.h>

static const char SCHEMA[] =
    "CREATE TABLE IF NOT EXISTS event_states(event_id INTEGER NOT NULL, tid INTEGER NOT NULL,"
    " state TEXT NOT NULL, syscall TEXT NOT NULL, fd TEXT NOT NULL, samples INTEGER NOT NULL);"
    "CREATE INDEX IF NOT EXISTS event_states_event ON event_states(event_id);";

enum ss_stmt { SS_INSERT, SS_OF_EVENT, SS_COUNT };

static const char *const SS_SQL[SS_COUNT] = {
    [SS_INSERT] = "INSERT INTO event_states(event_id, tid, state, syscall, fd, samples)"
                  " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [SS_OF_EVENT] = "SELECT tid, state, syscall, fd, samples FROM event_states"
                    " WHERE event_id = ?1 ORDER BY samples DESC, rowid",
};

struct store_states_s {
  sqlite3_stmt *stmt[SS_COUNT];
};

int store_states_open(sqlite3 *db, store_states_t **out) {
  *out = NULL;
  int rc = sqlite3_exec(db, SCHEMA, NULL, NULL, NULL);
  if (rc != SQLITE_OK) return rc;
  store_states_t *ss = calloc(1, sizeof *ss);
  if (!ss) return SQLITE_NOMEM;
  for (int i = 0; i < SS_COUNT; i++) {
    if ((rc = sqlite3_prepare_v2(db, SS_SQL[i], -1, &ss->stmt[i], NULL)) != SQLITE_OK) {
      store_states_close(ss);
      return rc;
    }
  }
  *out = ss;
  return SQLITE_OK;
}

void store_states_close(store_states_t *ss) {
  if (!ss) return;
  for (int i = 0; i < SS_COUNT; i++)
    sqlite3_finalize(ss->stmt[i]);
  free(ss);
}

int store_states_insert(store_states_t *ss, sqlite3_int64 event_id, const store_event_t *e) {
  sqlite3_stmt *s = ss->stmt[SS_INSERT];
  for (size_t i = 0; i < e->n_states; i++) {
    const store_state_count_t *c = &e->states[i];
    sqlite3_bind_int64(s, 1, event_id);
    sqlite3_bind_int64(s, 2, c->tid);
    sqlite3_bind_text(s, 3, c->state, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 4, c->syscall, -1, SQLITE_STATIC);
    sqlite3_bind_text(s, 5, c->fd, -1, SQLITE_STATIC);
    sqlite3_bind_int64(s, 6, (sqlite3_int64)c->samples);
    int rc = sqlite3_step(s);
    sqlite3_reset(s);
    if (rc != SQLITE_DONE) return rc;
  }
  sqlite3_clear_bindings(s);
  return SQLITE_OK;
}

int store_states_of_event(store_states_t *ss, int64_t id, store_state_row_fn fn, void *user) {
  sqlite3_stmt *s = ss->stmt[SS_OF_EVENT];
  sqlite3_bind_int64(s, 1, id);
  int rc, stopped = 0;
  while (!stopped && (rc = sqlite3_step(s)) == SQLITE_ROW) {
    store_state_count_t row = {
        (uint32_t)sqlite3_column_int64(s, 0), (const char *)sqlite3_column_text(s, 1),
        (const char *)sqlite3_column_text(s, 2), (const char *)sqlite3_column_text(s, 3),
        (uint64_t)sqlite3_column_int64(s, 4)};
    stopped = fn(&row, user);
  }
  sqlite3_reset(s);
  return !stopped && rc == SQLITE_DONE ? STORE_OK : STORE_ERROR;
}
