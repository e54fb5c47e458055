/*
 * stacks.h - the stack exports of the read-only API: GET
 * /api/v1/export/folded (flamegraph.pl's input) and GET /api/v1/flame (the
 * same stacks as a JSON tree), the per-stack sums of a query's events.
 */
#ifndef PERF_COLLECTOR_API_STACKS_H
#define PERF_COLLECTOR_API_STACKS_H

#include "collector/api/params.h"
#include "collector/store/store.h"

/* Caps on one answer, whatever the store holds (docs/api.md "Limits"):
   the stack exports (folded, flame, pprof) read at most
   QUERY_MAX_STACK_TEXT bytes of stored frames, heaviest stacks first; the
   samples of the stacks past it are shown as one stack of the single frame
   QUERY_TRUNCATED. */
#define QUERY_MAX_STACK_TEXT (16u << 20)
#define QUERY_TRUNCATED "<truncated>"

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

/* GET /api/v1/flame/diff: two selections' stacks in one tree, the flame's
   filters for the one shown and, for the baseline, base_version, base_from
   and base_to in their place (at least one given; the other filters are
   shared). Each node has both sides' values (the baseline's prefixed
   "base_"), each side's share of its total time (CPU for cpu, the hangs'
   wall time for hang; of its samples for a side whose events carry no
   time: "share", "base_share") and "delta" = share -
   base_share. 400 without a baseline parameter; else as flame. */
unsigned query_flame_diff(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body);

#endif
