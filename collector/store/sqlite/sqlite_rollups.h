/*
 * sqlite_rollups.h - the SQLite store's rollups (rollup.h, rollup_sql.h):
 * the tables made when missing or made by a collector before CPU time
 * (then built from the raw rows already stored, so an older database gains
 * them at open), the perf_dbin() SQL
 * function registered on the connection, a batch's rows appended to the
 * delta tables at ingest (rollup_sql.h), the folds that move them into
 * the rollups, and the buckets retention or re-symbolization touched
 * rebuilt. Used by
 * sqlite_store.c inside its transactions and under its lock; its queries
 * read the tables there.
 */
#ifndef PERF_COLLECTOR_STORE_ROLLUPS_H
#define PERF_COLLECTOR_STORE_ROLLUPS_H

#include <sqlite3.h>

#include "collector/store/store.h"

typedef struct store_rollups_s store_rollups_t;

/* The function, tables and statements on db; when the tables are new and
   events are stored, they are built (one transaction). SQLITE_OK or the
   error. */
int store_rollups_open(sqlite3 *db, store_rollups_t **out);
void store_rollups_close(store_rollups_t *rs);

/* Batch b's 10-minute rows (rollup_batch.h; group[i]: the group stored
   with its event i) appended to the delta tables. */
int store_rollups_add_batch(store_rollups_t *rs, const store_batch_t *b, const char *const *group);

/* The delta rows summed per key into both levels and deleted, in the
   caller's transaction. */
int store_rollups_fold(store_rollups_t *rs);

/* Mark dirty the buckets of the events of batches received before
   cutoff_ns (before retention deletes them), or of the events in the
   temporary table resym_events (re-symbolization). */
int store_rollups_mark_before(store_rollups_t *rs, int64_t cutoff_ns);
int store_rollups_mark_resym(store_rollups_t *rs);

/* The dirty buckets' rollups made again from the raw rows left (the
   delta rows folded first). */
int store_rollups_rebuild(store_rollups_t *rs);

#endif
