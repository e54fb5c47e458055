/*
 * sqlite_states.h - the SQLite store's thread states: per event, its
 * samples per thread and state (table event_states: event_id, tid, state,
 * syscall, fd, samples; made when missing, so an older database gains it
 * at open and its events simply have no states). Used by sqlite_store.c
 * inside its transactions and under its lock.
 */
#ifndef PERF_COLLECTOR_STORE_STATES_H
#define PERF_COLLECTOR_STORE_STATES_H

#include <sqlite3.h>

#include "collector/store/store.h"

typedef struct store_states_s store_states_t;

/* The table (created when missing) and statements on db; SQLITE_OK or the
   error. */
int store_states_open(sqlite3 *db, store_states_t **out);
void store_states_close(store_states_t *ss);

/* Event event_id's states (e->states). SQLITE_OK or the error. */
int store_states_insert(store_states_t *ss, sqlite3_int64 event_id, const store_event_t *e);

/* Event id's rows, most samples first, to fn. STORE_OK or STORE_ERROR. */
int store_states_of_event(store_states_t *ss, int64_t id, store_state_row_fn fn, void *user);

#endif
