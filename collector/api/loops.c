/*
 * loops.c - GET /api/v1/loops (see loops.h): the store's loop totals of
 * the query (of one loop with loop=NAME), as JSON.
 */
#include "collector/api/loops.h"

#include <jansson.h>
#include <stdlib.h>

#include "collector/api/loop_json.h"

unsigned query_loops(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                     char **body) {
  *body = NULL;
  store_top_query_t q;
  unsigned bad = query_event_filters(arg, ctx, &q, body);
  if (bad) return bad;
  if (q.kind) return *body = query_error_param("parameter %s: not a filter of loops", "kind"), 400;
  if (q.group)
    return *body = query_error_param("parameter %s: not a filter of loops", "group"), 400;
  if (q.label)
    return *body = query_error_param("parameter %s: not a filter of loops", "label"), 400;
  store_loop_totals_t t;
  if (ops->loop_totals(store, &q, &t) != STORE_OK)
    return *body = query_error_json("the store failed or ran out of memory"), 503;
  json_t *o = json_pack("{s:o}", "loops", loop_totals_json(&t));
  *body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (!*body) return *body = query_error_json("out of memory"), 503;
  return 200;
}
