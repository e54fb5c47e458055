/*
 * read_request.h - a GET that reads the store (an API route, /metrics),
 * answered on a read thread (job_pool.h, "perf-read") instead of an MHD
 * worker, so that a read waiting for a lock leaves the workers free for
 * /healthz and every other request. Its query arguments are copied on the
 * worker (the connection is suspended while the read runs and MHD's
 * values of it are not touched from another thread); the read thread
 * calls the route's handler (collector/api/routes.h) with that copy and
 * keeps the answer for the worker to send.
 *
 * Threads: new, check_text and free on the connection's MHD worker; run
 * on a read thread while the connection is suspended.
 */
#ifndef PERF_COLLECTOR_READ_REQUEST_H
#define PERF_COLLECTOR_READ_REQUEST_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "collector/api/routes.h"
#include "collector/store/store.h"

typedef struct read_arg_s {
  char *name, *value; /* value NULL: "?name" without "=" */
} read_arg_t;

typedef struct read_request_s {
  const api_route_t *route; /* NULL: /metrics */
  char *item;               /* an item route's item (the path's rest) */
  read_arg_t *args;         /* the query's arguments, in the URL's order */
  size_t n_args, cap_args;
  /* The answer, set by read_request_run: */
  unsigned status;
  uint8_t *body; /* malloc'ed, len bytes; NULL when out of memory */
  size_t len;
  const char *type;        /* its Content-Type */
  const char *disposition; /* its Content-Disposition; NULL: none */
} read_request_t;

/* The read of route (item: an item route's item, else NULL) or, route
   NULL, of /metrics, with a copy of conn's query arguments. NULL when out
   of memory. Free with read_request_free. */
read_request_t *read_request_new(struct MHD_Connection *conn, const api_route_t *route,
                                 const char *item);

/* The first query argument that is not UTF-8 text (query_check_text):
   400 and *body its JSON error (malloc'ed, the caller frees); 0 when all
   are text. */
unsigned read_request_check_text(const read_request_t *r, char **body);

/* Run the read and set the answer; cancelled (the collector is stopping
   before the read started): 503 "collector stopping" without reading. */
void read_request_run(read_request_t *r, const store_ops_t *ops, store_t *store, bool cancelled);

/* The answer for a read refused at once: 503 {"error": text}. */
void read_request_refuse(read_request_t *r, const char *text);

void read_request_free(read_request_t *r); /* NULL: no-op */

#endif
