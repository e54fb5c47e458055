/*
 * server.h - the collector's HTTP side on libmicrohttpd: POST /v1/batches,
 * GET /healthz, GET /metrics. MHD runs its own listening thread and a pool
 * of worker threads; every request is handled on the worker that owns its
 * connection.
 */
#ifndef PERF_COLLECTOR_SERVER_H
#define PERF_COLLECTOR_SERVER_H

#include "apikeys.h"
#include "options.h"
#include "store.h"

typedef struct server_s server_t;

/* Start serving; keys NULL accepts any key (main allows that only on
   loopback). Everything passed must outlive the server. NULL on failure,
   with the reason on stderr. */
server_t *server_start(const collector_options_t *opts, const apikeys_t *keys,
                       const store_ops_t *ops, store_t *store);

/* Close every connection and join MHD's threads. */
void server_stop(server_t *s);

#endif
