/*
 * query_params.h - the read statements' parameters, numbered once for
 * every backend: which slot holds which filter of a store_top_query_t and
 * which part of a rollup plan (rollup.h), and the one function that binds
 * them through a backend's own binder. The SQL that reads those slots is
 * query_sql.h's.
 */
#ifndef PERF_COLLECTOR_QUERY_PARAMS_H
#define PERF_COLLECTOR_QUERY_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/model/records.h"
#include "collector/model/rollup.h"

/* The slots (1-based, as SQL numbers them). Preprocessor numbers, so the
   SQL text can be built from them (STORE_STR). */
#define STORE_SLOT_APP 1
#define STORE_SLOT_VERSION 2
#define STORE_SLOT_ENVIRONMENT 3
#define STORE_SLOT_FROM 4 /* the time range, inclusive: events' start, batches' arrival */
#define STORE_SLOT_TO 5
#define STORE_SLOT_KIND 6 /* "hang" also takes fatal_hang */
#define STORE_SLOT_OWN                                                                             \
  7                        /* 7..9: a statement's own (the events' limit; time buckets: 7 the      \
                              bucket, 8 the most buckets) */
#define STORE_SLOT_GROUP 8 /* only a group's events (QSQL_GROUP_FILTER) */
#define STORE_SLOT_HOST 10
#define STORE_SLOT_TAG 11    /* key and value of the first tag filter, then two a tag */
#define STORE_SLOT_LABEL 19  /* past STORE_MAX_TAG_FILTERS tags */
#define STORE_SLOT_DAY 20    /* the plan: day rows' range (2 slots) */
#define STORE_SLOT_RAW 22    /* raw events' two ranges (4 slots) */
#define STORE_SLOT_BUCKET 26 /* 10-minute rows' two ranges (4 slots) */
#define STORE_SLOT_LOOP 30   /* only a loop's events (QSQL_LOOP_FILTER) */
#define STORE_SLOT_ROWS 31   /* the rows a bounded read sums, at most (QSQL_BOUNDED) */
_Static_assert(STORE_SLOT_TAG + 2 * STORE_MAX_TAG_FILTERS == STORE_SLOT_LABEL,
               "the tag filters' slots end where the label's begins");
_Static_assert(STORE_SLOT_BUCKET + 4 == STORE_SLOT_LOOP, "the loop's slot follows the plan's");

/* How a backend binds one slot of the statement in hand: text (len bytes;
   text NULL: SQL NULL) or a 64-bit integer. */
typedef struct store_binder_s {
  void *stmt;
  void (*text)(void *stmt, int slot, const char *text, size_t len);
  void (*i64)(void *stmt, int slot, int64_t value);
} store_binder_t;

/* q's filters into their slots (app, version, environment, host, from,
   to, kind, label, loop, tags; a statement that does not read a slot ignores
   it). The statement's own slots and the group are the caller's. */
void store_bind_filters(const store_binder_t *b, const store_top_query_t *q);

/* The rows a bounded read sums, at most, into STORE_SLOT_ROWS. */
void store_bind_rows(const store_binder_t *b, uint64_t rows_max);

/* A rollup plan's ranges into STORE_SLOT_DAY .. STORE_SLOT_BUCKET + 3. */
void store_bind_plan(const store_binder_t *b, const rollup_plan_t *plan);

#endif
