/*
 * loops.h - GET /api/v1/loops: how the watched event loops of the batches
 * matching a query spent their time: watched hours, hangs per hour of
 * watched time, the busy fraction, units of work by duration.
 */
#ifndef PERF_COLLECTOR_API_LOOPS_H
#define PERF_COLLECTOR_API_LOOPS_H

#include "collector/api/params.h"
#include "collector/store/store.h"

/* The filters app, version, environment, host, tag, from, to (unix ms:
   the loop stats by their batch's arrival, hangs by their start); kind,
   group and label are refused with 400. 200 with {"loops": T} where T is
   loop_totals_json's object (loop_json.h); 400 {"error"} naming the bad
   parameter; 503 when the store failed. *body is malloc'ed (the caller
   frees). */
unsigned query_loops(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                     char **body);

#endif
