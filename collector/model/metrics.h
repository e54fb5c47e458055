/*
 * metrics.h - the collector's counters and its ingest latency histogram,
 * rendered in the Prometheus text format for GET /metrics. Updated with
 * atomics from MHD's worker threads; read by whichever thread serves
 * /metrics.
 */
#ifndef PERF_COLLECTOR_METRICS_H
#define PERF_COLLECTOR_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "collector/model/records.h"

/* Why a batch was refused: the reason label of
   perf_collector_batches_rejected_total. */
typedef enum reject_reason {
  REJECT_UNAUTHORIZED,       /* 401 */
  REJECT_BODY_TOO_LARGE,     /* 413, compressed body */
  REJECT_DECOMPRESSED_LARGE, /* 413, zstd output over the cap */
  REJECT_BAD_PAYLOAD,        /* 400, not zstd / not a valid Batch */
  REJECT_BAD_BATCH_ID,       /* 400, header missing or not matching the payload */
  REJECT_UNSUPPORTED_MEDIA,  /* 415 */
  REJECT_RATE_LIMITED,       /* 429 */
  REJECT_STORE_ERROR,        /* 503 */
  REJECT_OVER_LIMIT,         /* 413, a batch limit (batch_limits.h) */
  REJECT_FORBIDDEN,          /* 403, the key lacks the ingest scope, or a cross-site request */
  REJECT_DB_LOST,            /* 503, the database file was deleted or replaced (db_identity.h) */
  /* 429 (413 when one batch alone passes it): a key's bound on new values
     per window (key_bounds.h), one reason per bound in key_bound_kind order */
  REJECT_NEW_STACKS,
  REJECT_NEW_LABELS,
  REJECT_NEW_VERSIONS,
  REJECT_NEW_TAGS,
  REJECT_COUNT
} reject_reason_t;

void metrics_batch_accepted(uint64_t events, uint64_t samples, double ingest_seconds);
void metrics_batch_duplicate(void);
void metrics_batch_rejected(reject_reason_t why);

/* Symbolization: a debug file uploaded; frames the device did not name,
   named at ingest from a debug file or not; stored stacks renamed later. */
void metrics_symbols_uploaded(void);
void metrics_frames_symbolized(uint64_t named, uint64_t unnamed);
void metrics_stacks_resymbolized(uint64_t stacks);
/* A debuginfod fetch left to another collector holding its claim. */
void metrics_debuginfod_deferred(void);

/* A stored batch's drop counters (store_batch_t.drops): events its SDK
   dropped, by reason (perf_collector_sdk_events_dropped_total). */
void metrics_sdk_drops(const uint64_t dropped[STORE_DROP_COUNT]);

/* A stored batch's loop stats: perf_collector_loop_stats_batches_total
   and perf_collector_loop_watched_seconds_total (ms resolution). */
void metrics_loop_stats(const store_loop_stats_t *stats);

/* An alert that ended "delivered", "failed" or "suppressed"
   (perf_collector_alerts_total{state}), and a batch's evaluation dropped
   at the alert thread's full queue (collector/alerts/alert_engine.h). */
void metrics_alert(const char *state);
void metrics_alert_evaluation_dropped(void);

/* A connection shut down at its request deadline (conn_guard.h). */
void metrics_request_expired(void);

/* The Prometheus text (malloc'd, NUL-terminated; NULL when out of memory);
   stats are the store's current numbers. */
char *metrics_render(const store_stats_t *stats);

#endif
