/*
 * query_states.h - thread states in the read-only API: GET /api/v1/states
 * (the samples per state over the events of a query) and the "states" of
 * an event's detail. Runs on the MHD worker that received the request.
 */
#ifndef PERF_COLLECTOR_QUERY_STATES_H
#define PERF_COLLECTOR_QUERY_STATES_H

#include <jansson.h>

#include "collector/api/params.h"
#include "collector/store/store.h"

/* GET /api/v1/states: the filters of export/folded (kind required, group
   optional: a top-stacks signature, so a stack view shows its own
   states). 200 {"samples":N,"states":[{"state","syscall","fd","samples",
   "share"}]}: the samples of the matching events that carry states,
   summed per state ("running", "lock", "io", "poll", "sleep", "other",
   "unknown"), system call ("" none) and descriptor kind ("" none), most
   samples first; share = samples / N. Events from SDKs that send no
   states add nothing. Errors as for export/folded. */
unsigned query_states(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                      char **body);

/* Event id's states: [{"tid","state","syscall","fd","samples"}], most
   samples first ([] for an event without states). A new reference; NULL
   when the store failed or memory ran out. */
json_t *query_event_states(const store_ops_t *ops, store_t *store, int64_t id);

#endif
