/*
 * export_pprof.h - GET /api/v1/export/pprof: the stacks of the matching
 * events as a gzipped pprof profile (proto/pprof/profile.proto), the file
 * `go tool pprof` and the other pprof tools open. Independent of HTTP like
 * params.h; runs on the MHD worker that received the request.
 */
#ifndef PERF_COLLECTOR_EXPORT_PPROF_H
#define PERF_COLLECTOR_EXPORT_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "collector/api/params.h"
#include "collector/store/store.h"

/* The same filters as export/folded (kind=hang|cpu required; app, version,
   environment, from, to) and the same stacks: one Sample per distinct
   stack with its samples summed, then its time: for kind hang its wall
   time (each event's duration shared among its stacks by their samples),
   for kind cpu its CPU time. 200 with
   *body the gzipped Profile (*len bytes); otherwise the status (400, 503)
   with *body a JSON {"error"} (*len its length, no NUL counted). *body is
   malloc'ed, the caller frees it; NULL only when out of memory. */
unsigned export_pprof(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                      uint8_t **body, size_t *len);

#endif
