/*
 * drops.c - GET /api/v1/drops (see drops.h).
 */
#include "collector/api/drops.h"

#include <jansson.h>
#include <stdlib.h>

unsigned query_drops(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                     char **body) {
  *body = NULL;
  store_top_query_t q;
  unsigned bad = query_filters(arg, ctx, &q, body);
  if (bad) return bad;
  /* Drops are the batches', not an event kind's or a group's. */
  if (q.kind) return *body = query_error_param("parameter %s: not a filter of drops", "kind"), 400;
  if (q.group)
    return *body = query_error_param("parameter %s: not a filter of drops", "group"), 400;
  if (q.label)
    return *body = query_error_param("parameter %s: not a filter of drops", "label"), 400;
  store_drops_t d;
  if (ops->drops(store, &q, &d) != STORE_OK)
    return *body = query_error_param("%s", "the store failed or ran out of memory"), 503;
  json_t *o = json_object();
  for (int i = 0; o && i < STORE_DROP_COUNT; i++)
    if (json_object_set_new(o, store_drop_name((enum store_drop_reason)i),
                            json_integer((json_int_t)d.dropped[i])) != 0)
      json_decref(o), o = NULL;
  if (o && json_object_set_new(o, "batches", json_integer((json_int_t)d.batches)) != 0)
    json_decref(o), o = NULL;
  /* The newest rows_limit batches only: said, with how many were summed. */
  query_rows_t rows = {d.batches, d.rows_limit};
  if (o && query_rows_cut(&rows) &&
      (json_object_set_new(o, "truncated", json_true()) != 0 || query_rows_json(o, &rows) != 0))
    json_decref(o), o = NULL;
  *body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (!*body) return *body = query_error_param("%s", "out of memory"), 503;
  return 200;
}
