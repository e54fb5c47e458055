/*
 * server.h - the collector's HTTP side on libmicrohttpd: POST /v1/batches,
 * POST /v1/symbols/<build-id>, GET /healthz, GET /metrics, GET /api/v1/... MHD runs its own
 * listening thread and a pool of worker threads; every request is handled on the worker that owns
 * its connection.
 */
#ifndef PERF_COLLECTOR_SERVER_H
#define PERF_COLLECTOR_SERVER_H

#include <sys/socket.h>

#include "collector/http/apikeys.h"
#include "collector/http/options.h"
#include "collector/store/store.h"
#include "collector/symbols/resymbolize.h"
#include "collector/symbols/symbolize.h"

typedef struct server_s server_t;

/* Start serving; keys NULL accepts any key (main allows that only on
   loopback); symbols names frames at ingest, resym renames stored stacks
   (both may be NULL). Everything passed must outlive the server. NULL on
   failure, with the reason on stderr. */
server_t *server_start(const collector_options_t *opts, const apikeys_t *keys,
                       const store_ops_t *ops, store_t *store, symbolizer_t *symbols,
                       resymbolizer_t *resym);

/* A connected socket handed to the server as if it had accepted it (the
   HTTP fuzz target, with opts->no_listen): the server owns fd from now
   on, even on failure. 0, or -1. */
int server_add_connection(server_t *s, int fd, const struct sockaddr *addr, socklen_t len);

/* Close every connection and join MHD's threads. */
void server_stop(server_t *s);

#endif
