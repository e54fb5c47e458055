/*
 * query.h - the read-only JSON API under /api/v1/ (today: top-stacks).
 * Independent of HTTP: the caller hands a lookup for the query-string
 * parameters and gets the status and a JSON body back. Runs on the MHD
 * worker that received the request; the store serializes its own access.
 */
#ifndef PERF_COLLECTOR_QUERY_H
#define PERF_COLLECTOR_QUERY_H

#include "store.h"

/* A query-string parameter by name; NULL when absent. */
typedef const char *(*query_arg_fn)(void *ctx, const char *name);

#define QUERY_LIMIT_DEFAULT 20
#define QUERY_LIMIT_MAX 1000

/* GET /api/v1/top-stacks: kind=hang|cpu (required), app, version,
   environment (exact match; empty = any), from, to (unix milliseconds,
   inclusive, on the event's start), limit (1..1000, default 20).
   *body (malloc'ed, the caller frees; NULL only when out of memory) is
   {"stacks":[...]} with 200, {"error":"..."} naming the bad parameter with
   400, or {"error":"..."} with 503 when the store failed. */
unsigned query_top_stacks(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body);

#endif
