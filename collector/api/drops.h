/*
 * drops.h - GET /api/v1/drops: the events the SDKs dropped before sending.
 */
#ifndef PERF_COLLECTOR_API_DROPS_H
#define PERF_COLLECTOR_API_DROPS_H

#include "collector/api/params.h"
#include "collector/store/store.h"

/* GET /api/v1/drops: the events the SDKs dropped before sending, summed
   over the batches matching app, version, environment, host, tag, from
   and to (on the batch's arrival at the collector; kind and group are
   refused with 400): {"rate_limited":N,"queue_full":N,"sink_failed":N,
   "spool_quota":N,"oversized":N,"batches":N}. */
unsigned query_drops(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                     char **body);

#endif
