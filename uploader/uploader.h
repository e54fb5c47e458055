/*
 * uploader.h - the upload thread: sends the spool's batches, oldest first,
 * to the collector and deletes each only after a 2xx; retries with backoff
 * (or as Retry-After says) when the collector is down or busy; sets aside
 * batches it refuses for good.
 */
#ifndef PERF_UPLOADER_H
#define PERF_UPLOADER_H

#include <stdint.h>

#include "sdk/base/stats.h"
#include "sdk/wire/spool.h"
#include "uploader/transport.h"

typedef struct perf__uploader_options_s {
  const char *endpoint;         /* collector base URL, e.g. http://127.0.0.1:4318 */
  const char *api_key;          /* NULL: no Authorization header */
  perf__spool_t *spool;         /* where batches wait; outlives the uploader */
  perf__transport_t *transport; /* owned by the uploader from start on */
  int64_t backoff_base_ms;      /* first retry delay ceiling */
  int64_t backoff_cap_ms;       /* largest retry delay ceiling */
  unsigned max_server_errors;   /* other 5xx: attempts before the batch is dropped */
  perf__stats_t *stats;         /* counters; outlives the uploader */
  unsigned stall_warn_ms;       /* no batch arrived for this long: one warning; 0: never */
} perf__uploader_options_t;

typedef struct perf__uploader_s perf__uploader_t;

/* Start the thread ("perf-uploader", a perf__worker: its tid is in the SDK's
   registry). Copies the options; strings too. */
int perf__uploader_start(const perf__uploader_options_t *opts, perf__uploader_t **out);

/* A batch was added to the spool: look now (unless waiting out a backoff). */
void perf__uploader_wake(perf__uploader_t *u);

/* Wait until the spool is empty or `deadline_ns` (monotonic) passes.
   PERF_E_TIMEOUT when batches remain (they stay on disk). */
int perf__uploader_flush(perf__uploader_t *u, int64_t deadline_ns);

/* Stop: a request in flight is interrupted; whatever is not delivered stays
   in the spool for the next run. Frees the uploader and its transport. */
void perf__uploader_stop(perf__uploader_t *u);

#endif
