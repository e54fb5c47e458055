/*
 * ingest.h - one POST /v1/batches body from bytes to stored rows: the
 * reference decoder (perf__batch_decode: capped streaming zstd, protobuf,
 * table references), the collector's own schema checks, then the store
 * record (frames the device did not name symbolized by build-id from local
 * debug files, stack signatures, frames as JSON) put in one transaction.
 * Keeps no state of its own (the stack cache and the key's bounds are the
 * target's); runs on the MHD worker thread that received the body.
 */
#ifndef PERF_COLLECTOR_INGEST_H
#define PERF_COLLECTOR_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "collector/ingest/batch_limits.h"
#include "collector/ingest/key_bounds.h"
#include "collector/ingest/stack_cache.h"
#include "collector/model/metrics.h"
#include "collector/store/store.h"
#include "collector/symbols/resymbolize.h"
#include "collector/symbols/symbolize.h"

typedef struct ingest_result_s {
  unsigned status;        /* HTTP status: 200 (stored durably, as --durability says), 400,
                             413 (a limit, named in message), 429 (a key's bound on new values,
                             named in message), 503 (store failed or lost) */
  reject_reason_t reason; /* when status is not 200 */
  char message[160];      /* the response body's reason */
  uint64_t events, samples;
  int duplicate;          /* 200 for a batch id stored already */
  unsigned retry_after_s; /* 429: the seconds until the key's window frees */
} ingest_result_t;

typedef struct ingest_target_s {
  const store_ops_t *ops;
  store_t *store;
  size_t max_decompressed;      /* cap on the zstd output */
  symbolizer_t *symbols;        /* names unnamed frames from local debug files; may be NULL */
  resymbolizer_t *resym;        /* told the build-ids it could not name; may be NULL */
  const batch_limits_t *limits; /* NULL: the defaults (batch_limits.h) */
  stack_cache_t *stack_cache;   /* built stacks kept between batches; may be NULL */
  key_bounds_t *bounds;         /* new values per key and window (key_bounds.h); NULL: none */
  /* Told each batch stored (not a duplicate): its app and version (NULL
     when the batch named none), on the ingest thread after the commit; it
     must not wait (the alert thread's queue). NULL: nobody. */
  void (*stored)(void *user, const char *app, const char *version);
  void *stored_user;
} ingest_target_t;

/* Decode, check and store body sent with ingest key `key` (NULL: none);
   the batch id in the payload must equal header_id (X-Perf-Batch-Id).
   Fills *res and returns its status. */
unsigned ingest_batch(const ingest_target_t *t, const char *key, const uint8_t *body, size_t len,
                      const uint8_t header_id[STORE_BATCH_ID_BYTES], ingest_result_t *res);

#endif
