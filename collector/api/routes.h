/*
 * routes.h - the read-only API's route table: every GET under /api/v1/,
 * the handler that answers it and the type of its answer. The HTTP server
 * (collector/http/server.c) checks access, finds the route here and sends
 * what the handler returns; a new endpoint is a handler in this folder and
 * a row in routes.c.
 */
#ifndef PERF_COLLECTOR_API_ROUTES_H
#define PERF_COLLECTOR_API_ROUTES_H

#include <stddef.h>
#include <stdint.h>

#include "collector/api/params.h"
#include "collector/store/store.h"

/* A handler answering from the query string: the status and *body
   (malloc'ed, the caller frees; NULL only when out of memory), JSON
   {"error"} unless the status is 200. */
typedef unsigned (*api_text_fn)(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                                char **body);

/* The same with a binary body of *len bytes (an export). */
typedef unsigned (*api_bytes_fn)(const store_ops_t *ops, store_t *store, query_arg_fn arg,
                                 void *ctx, uint8_t **body, size_t *len);

/* A handler of one item named by the path's rest (/api/v1/events/<id>). */
typedef unsigned (*api_item_fn)(const store_ops_t *ops, store_t *store, const char *item,
                                char **body);

/* One route: exactly one of text, bytes and item is set. */
typedef struct api_route_s {
  const char *path; /* the whole path; item: the prefix before the item */
  api_text_fn text;
  api_bytes_fn bytes;
  api_item_fn item;
  const char *type;        /* a 200 answer's Content-Type (errors are JSON) */
  const char *disposition; /* a 200 answer's Content-Disposition; NULL: none */
} api_route_t;

/* The route of path, *item pointing at the item of an item route; NULL
   when no route takes path. */
const api_route_t *api_route_find(const char *path, const char **item);

#endif
