/*
 * known_rows.h - the stacks and groups a collector's store has seen
 * stored (known_rows.c), so that a batch leaves out the rows it knows
 * stored instead of writing them again. Every backend keeps one per
 * table (stacks, groups) under its own lock; not thread-safe by itself.
 *
 * A stored stack's or group's last_seen (ns) trails the latest batch
 * with it by at most STORE_LAST_SEEN_STEP: a batch that writes the row
 * moves last_seen to its arrival only when it is more than
 * STORE_LAST_SEEN_MOVE behind, and for STORE_KNOWN_FOR after a batch
 * wrote it the batches may leave the row out. Retention deletes a row
 * only when its last_seen is over a step before the cutoff
 * (STORE_RETENTION_SLACK_NS).
 */
#ifndef PERF_COLLECTOR_STORE_KNOWN_ROWS_H
#define PERF_COLLECTOR_STORE_KNOWN_ROWS_H

#include <stdbool.h>
#include <stdint.h>

#include "collector/store/store.h"

#define STORE_LAST_SEEN_STEP 3600000000000
_Static_assert(STORE_LAST_SEEN_STEP <= STORE_RETENTION_SLACK_NS, "store.h: retention slack");
#define STORE_LAST_SEEN_MOVE 1800000000000
#define STORE_KNOWN_FOR (STORE_LAST_SEEN_STEP - STORE_LAST_SEEN_MOVE)

/* Signatures of stacks (or groups) known stored, each with the arrival of
   the last batch that wrote its row and committed. Fixed in size; the
   oldest of a full set replaced. */
typedef struct store_known_s store_known_t;
store_known_t *store_known_new(void); /* NULL when out of memory; store_known_free */
void store_known_free(store_known_t *k);
/* Forget every row: rows were deleted or moved (retention,
   re-symbolization), or another writer changed the database. */
void store_known_clear(store_known_t *k);
/* sig known stored, its last_seen within a step of a batch received at
   received_ns (the batch need not write its row). */
bool store_known_fresh(const store_known_t *k, const char *sig, int64_t received_ns);
/* A batch received at received_ns wrote sig's row and committed. */
void store_known_note(store_known_t *k, const char *sig, int64_t received_ns);

#endif
