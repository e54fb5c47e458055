/*
 * versions_api.h - GET /api/v1/versions/compare: is version b of an app
 * worse than version a? Rates per hour of watched time (the SDKs' loop
 * stats, docs/protocol.md "Loop stats"), not counts.
 */
#ifndef PERF_COLLECTOR_VERSIONS_API_H
#define PERF_COLLECTOR_VERSIONS_API_H

#include "collector/api/params.h"
#include "collector/store/store.h"

#define VERSIONS_MAX_MOVED 10 /* hang groups in "grew" and in "shrank" each */

/* app (required), a and b (required, different, at most 256 bytes each),
   and the filters environment, host, tag, from, to (unix ms; the loop
   stats by their batch's arrival, hangs by their start) and loop (that
   loop's watched time and hangs; "main" also takes the stats of batches
   that named no loop; the groups that moved stay every loop's); kind,
   version, group and label are refused. 200 with
   {"app","environment","loop","versions":[A,B],"stacks":{"grew":[G],"shrank":[G]}}
   where each version is {"version","watched_hours","hangs",
   "hangs_per_hour" (null when nothing was watched),"busy_fraction" (null
   likewise),"stats_batches","histogram":[{"lower_ms","upper_ms" (null for
   the last),"units"}] x 9} and each group {"group","frames" (innermost
   first),"hangs_a","hangs_b","share_a","share_b","change" (share_b -
   share_a)}; 400 {"error"} naming the bad parameter; 503 when the store
   failed. *body is malloc'ed (the caller frees). */
unsigned versions_compare(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body);

#endif
