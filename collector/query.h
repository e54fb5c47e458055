/*
 * query.h - the read-only API under /api/v1/: top-stacks, export/folded,
 * flame, events, events/<id>, timeseries and drops.
 * Independent of HTTP: the caller hands a lookup for the query-string
 * parameters and gets the status and a JSON body back. Runs on the MHD
 * worker that received the request; the store serializes its own access.
 */
#ifndef PERF_COLLECTOR_QUERY_H
#define PERF_COLLECTOR_QUERY_H

#include <jansson.h>

#include "store.h"

/* The nth value (0: the first) of a query-string parameter by name; NULL
   when it has fewer. Only tag is read past its first value. */
typedef const char *(*query_arg_fn)(void *ctx, const char *name, size_t nth);

#define QUERY_LIMIT_DEFAULT 20
#define QUERY_LIMIT_MAX 1000

/* Caps on one answer, whatever the store holds (docs/api.md "Limits"):
   the stack exports (folded, flame, pprof) read at most
   QUERY_MAX_STACK_TEXT bytes of stored frames, heaviest stacks first; the
   samples of the stacks past it are shown as one stack of the single frame
   QUERY_TRUNCATED. The events list stops adding events once its JSON
   passes QUERY_MAX_EVENTS_JSON ("truncated": true), an event's detail its
   stacks once their stored frames pass QUERY_MAX_DETAIL_TEXT. */
#define QUERY_MAX_STACK_TEXT (16u << 20)
#define QUERY_MAX_EVENTS_JSON (4u << 20)
#define QUERY_MAX_DETAIL_TEXT (4u << 20)
#define QUERY_TRUNCATED "<truncated>"

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

/* GET /api/v1/export/folded: the same filters as top-stacks (kind
   required; no limit), and group (a top-stacks signature: only the events
   of that group, so a hang group's flame shows where inside it the time
   went). 200 with text (flamegraph.pl's folded input): one
   line per distinct stack of the matching events' stack_counts, frames
   root first joined by ';', a space and its samples summed; lines sorted.
   Errors as for top-stacks (JSON). */
unsigned query_export_folded(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                             char **body);

/* GET /api/v1/flame: the same stacks as a JSON tree, root first:
   {"name":"all","value":N,"children":[{"name","value","children"}]},
   children by value, largest first. */
unsigned query_flame(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                     char **body);

/* GET /api/v1/events: the filters (kind optional: hang|cpu, absent = any)
   and limit; {"events":[...]} newest first, each with its batch's "tags"
   ([{"key","value"}]). */
unsigned query_events(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                      char **body);

/* GET /api/v1/drops: the events the SDKs dropped before sending, summed
   over the batches matching app, version, environment, host, tag, from
   and to (on the batch's arrival at the collector; kind and group are
   refused with 400): {"rate_limited":N,"queue_full":N,"sink_failed":N,
   "spool_quota":N,"oversized":N,"batches":N}. */
unsigned query_drops(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                     char **body);

/* GET /api/v1/timeseries: the events of kind=hang|cpu (required) matching
   the filters of events (app, version, environment, host, tag, label,
   from, to; group is refused) counted per bucket=minute|hour|day (required;
   buckets start at multiples of it since the epoch, UTC):
   {"bucket_ms":N,"points":[{"start_ms","events","total_ms"}]}, buckets with
   events only, oldest first. At most QUERY_MAX_POINTS points: 400 naming
   bucket when from..to (both given) spans more buckets, or when more
   buckets than that hold events. */
#define QUERY_MAX_POINTS 1000
unsigned query_timeseries(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body);

/* GET /api/v1/events/<id_text>: the event with "threads" and "stacks";
   404 {"error"} when there is no such event (or id_text is no id). */
unsigned query_event(const store_ops_t *ops, store_t *store, const char *id_text, char **body);

/* The filters of the stack exports, for other exporters (export_pprof.c):
   kind (required, hang|cpu), app, version, environment, host, tag, from,
   to, group into *q (its tags point into the arguments' text),
   exactly as for export/folded. 0, or 400 with *body the JSON error
   naming the parameter (malloc'ed, the caller frees). */
unsigned query_stack_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body);

/* The common filters, for other queries (versions_api.c): kind (optional,
   hang|cpu), app, version, environment, host, tag, group, label, from,
   to into *q (pointing into the arguments' text), checked as for events.
   0, or 400 with *body the JSON error naming the parameter. */
unsigned query_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body);

/* A frame object (frame_json.h) to its name in the exports: its label (the
   function, "<function> [inline]", else "module-basename+0xaddr"). A new
   reference (the caller decrefs); NULL when out of memory. */
json_t *query_frame_name(const json_t *frame);

/* {"error":"<text>"} (malloc'ed, the caller frees; NULL when out of memory). */
char *query_error_json(const char *text);

#endif
