/*
 * top_stacks.h - GET /api/v1/top-stacks: the heaviest hang groups or CPU
 * stacks of a query, aggregated from the store's rows. Runs on the MHD
 * worker that received the request; the store serializes its own access.
 */
#ifndef PERF_COLLECTOR_API_TOP_STACKS_H
#define PERF_COLLECTOR_API_TOP_STACKS_H

#include "collector/api/params.h"
#include "collector/store/store.h"

/* GET /api/v1/top-stacks: kind=hang|cpu (required), app, version,
   environment, host (exact match; empty = any), tag=key:value (repeatable,
   at most STORE_MAX_TAG_FILTERS, the batch must have them all; split at
   the first colon, the key not empty), from, to (unix milliseconds,
   inclusive, on the event's start), limit (1..1000, default 20).
   *body (malloc'ed, the caller frees; NULL only when out of memory) is
   {"stacks":[...]} with 200, {"error":"..."} naming the bad parameter with
   400, or {"error":"..."} with 503 when the store failed. */
unsigned query_top_stacks(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body);

#endif
