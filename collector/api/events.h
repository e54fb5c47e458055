/*
 * events.h - events in the read-only API: GET /api/v1/events (the newest
 * events of a query), GET /api/v1/events/<id> (one event with its threads
 * and stacks) and GET /api/v1/timeseries (events counted per time bucket).
 */
#ifndef PERF_COLLECTOR_API_EVENTS_H
#define PERF_COLLECTOR_API_EVENTS_H

#include "collector/api/params.h"
#include "collector/store/store.h"

/* The events list stops adding events once its JSON passes
   QUERY_MAX_EVENTS_JSON ("truncated": true), an event's detail its stacks
   once their stored frames pass QUERY_MAX_DETAIL_TEXT. */
#define QUERY_MAX_EVENTS_JSON (4u << 20)
#define QUERY_MAX_DETAIL_TEXT (4u << 20)

/* GET /api/v1/events: the filters (kind optional: hang|cpu, absent = any)
   and limit; {"events":[...]} newest first, each with its batch's "tags"
   ([{"key","value"}]). */
unsigned query_events(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
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

#endif
