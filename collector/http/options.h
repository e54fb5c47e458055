/*
 * options.h - the collector's configuration, filled from the command line
 * by main.c and read-only afterwards (every thread may read it).
 */
#ifndef PERF_COLLECTOR_OPTIONS_H
#define PERF_COLLECTOR_OPTIONS_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>

#include "collector/alerts/alert_config.h"
#include "collector/ingest/batch_limits.h"
#include "collector/ingest/key_bounds.h"
#include "collector/model/in_app.h"
#include "collector/store/store.h"

typedef struct collector_options_s {
  struct sockaddr_in listen; /* --listen ADDR:PORT, IPv4 */
  const char *listen_text;
  const char *db_path;           /* --db */
  store_durability_t durability; /* --durability full|process: what a 200 survives */
  const char *api_keys_file;     /* --api-keys-file; NULL: any key (loopback only) */
  const char *symbols_dir;       /* --symbols-dir; default "<db>.symbols" (set by main) */
  size_t max_symbols_bytes;      /* POST /v1/symbols body cap (413) */
  unsigned retention_days;       /* --retention-days */
  unsigned retention_interval_s;
  unsigned fold_interval_s;      /* --rollup-fold-interval */
  uint64_t max_read_rows;        /* --max-read-rows: rows a top-stacks or stack read sums */
  size_t max_body_bytes;         /* compressed body cap (413) */
  size_t max_decompressed_bytes; /* zstd output cap (413) */
  double rate_limit;             /* batches per second per key; 0: off */
  double rate_burst;
  unsigned connection_timeout_s; /* idle connection / slow client timeout */
  unsigned request_timeout_s;    /* a request's absolute deadline (conn_guard.h) */
  unsigned threads;              /* MHD thread pool size */
  unsigned max_connections;
  unsigned max_connections_per_ip;
  unsigned long long max_symbols_dir_bytes; /* the symbols directory's quota (507) */
  bool open_metrics;                        /* GET /metrics without a key */
  bool no_listen;                           /* connections only from server_add_connection */
  batch_limits_t limits;          /* --max-batch-*, --max-event-samples, ... (batch_limits.h) */
  key_bounds_config_t key_bounds; /* --max-new-*, --new-window (key_bounds.h) */
  in_app_rules_t in_app;          /* --in-app-include, --in-app-exclude (in_app.h) */
  alert_config_t alerts;          /* --public-url, --alert-* (alert_config.h) */
} collector_options_t;

#endif
