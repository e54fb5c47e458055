/*
 * metrics.c - process-wide counters (C11 atomics, any thread) and the
 * Prometheus text rendering of GET /metrics.
 */
#include "collector/model/metrics.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_BUCKETS 10
static const double BUCKET_BOUNDS[N_BUCKETS] = {0.001, 0.0025, 0.005, 0.01, 0.025,
                                                0.05,  0.1,    0.25,  0.5,  1.0};
static const char *const REASON_LABEL[REJECT_COUNT] = {
    [REJECT_UNAUTHORIZED] = "unauthorized",
    [REJECT_BODY_TOO_LARGE] = "body_too_large",
    [REJECT_DECOMPRESSED_LARGE] = "decompressed_too_large",
    [REJECT_BAD_PAYLOAD] = "bad_payload",
    [REJECT_BAD_BATCH_ID] = "bad_batch_id",
    [REJECT_UNSUPPORTED_MEDIA] = "unsupported_media_type",
    [REJECT_RATE_LIMITED] = "rate_limited",
    [REJECT_STORE_ERROR] = "store_error",
    [REJECT_OVER_LIMIT] = "over_limit",
    [REJECT_FORBIDDEN] = "forbidden",
    [REJECT_DB_LOST] = "db_lost",
    [REJECT_NEW_STACKS] = "new_stacks",
    [REJECT_NEW_LABELS] = "new_labels",
    [REJECT_NEW_VERSIONS] = "new_versions",
    [REJECT_NEW_TAGS] = "new_tags",
};

static atomic_uint_fast64_t g_accepted, g_duplicates, g_events, g_samples;
static atomic_uint_fast64_t g_rejected[REJECT_COUNT];
static atomic_uint_fast64_t g_bucket[N_BUCKETS + 1]; /* last: +Inf */
static atomic_uint_fast64_t g_latency_ns_sum;
static atomic_uint_fast64_t g_symbols_uploaded, g_frames_named, g_frames_unnamed, g_resymbolized,
    g_debuginfod_deferred;
static atomic_uint_fast64_t g_expired;
static atomic_uint_fast64_t g_sdk_dropped[STORE_DROP_COUNT];
static atomic_uint_fast64_t g_loop_batches, g_loop_watched_ms;
static const char *const ALERT_STATES[] = {"delivered", "failed", "suppressed"};
#define N_ALERT_STATES (sizeof ALERT_STATES / sizeof ALERT_STATES[0])
static atomic_uint_fast64_t g_alerts[N_ALERT_STATES], g_alert_evaluations_dropped;

static void observe_latency(double seconds) {
  size_t i = 0;
  while (i < N_BUCKETS && seconds > BUCKET_BOUNDS[i])
    i++;
  atomic_fetch_add(&g_bucket[i], 1);
  atomic_fetch_add(&g_latency_ns_sum, (uint_fast64_t)(seconds * 1e9));
}

void metrics_batch_accepted(uint64_t events, uint64_t samples, double ingest_seconds) {
  atomic_fetch_add(&g_accepted, 1);
  atomic_fetch_add(&g_events, events);
  atomic_fetch_add(&g_samples, samples);
  observe_latency(ingest_seconds);
}

void metrics_batch_duplicate(void) {
  atomic_fetch_add(&g_duplicates, 1);
}

void metrics_batch_rejected(reject_reason_t why) {
  if ((unsigned)why < REJECT_COUNT) atomic_fetch_add(&g_rejected[why], 1);
}

typedef struct text_s {
  char *buf;
  size_t len, cap;
  int failed;
} text_t;

static void put(text_t *t, const char *fmt, ...) {
  if (t->failed) return;
  for (;;) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->buf + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
      t->failed = 1;
      return;
    }
    if ((size_t)n < t->cap - t->len) {
      t->len += (size_t)n;
      return;
    }
    char *grown = realloc(t->buf, t->cap * 2 + (size_t)n);
    if (!grown) {
      t->failed = 1;
      return;
    }
    t->buf = grown;
    t->cap = t->cap * 2 + (size_t)n;
  }
}

static void put_counter(text_t *t, const char *name, const char *help, uint64_t v) {
  put(t, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", name, help, name, name,
      (unsigned long long)v);
}

static void put_rejections(text_t *t) {
  put(t, "# HELP perf_collector_batches_rejected_total Batches refused, by reason.\n"
         "# TYPE perf_collector_batches_rejected_total counter\n");
  for (int i = 0; i < REJECT_COUNT; i++)
    put(t, "perf_collector_batches_rejected_total{reason=\"%s\"} %llu\n", REASON_LABEL[i],
        (unsigned long long)atomic_load(&g_rejected[i]));
}

static void put_histogram(text_t *t) {
  const char *n = "perf_collector_ingest_seconds";
  put(t, "# HELP %s Time from a complete body to the stored batch.\n# TYPE %s histogram\n", n, n);
  uint64_t cumulative = 0;
  for (int i = 0; i <= N_BUCKETS; i++) {
    cumulative += atomic_load(&g_bucket[i]);
    if (i < N_BUCKETS)
      put(t, "%s_bucket{le=\"%g\"} %llu\n", n, BUCKET_BOUNDS[i], (unsigned long long)cumulative);
    else
      put(t, "%s_bucket{le=\"+Inf\"} %llu\n", n, (unsigned long long)cumulative);
  }
  put(t, "%s_sum %.9f\n%s_count %llu\n", n, (double)atomic_load(&g_latency_ns_sum) / 1e9, n,
      (unsigned long long)cumulative);
}

void metrics_symbols_uploaded(void) {
  atomic_fetch_add(&g_symbols_uploaded, 1);
}

void metrics_request_expired(void) {
  atomic_fetch_add(&g_expired, 1);
}

void metrics_sdk_drops(const uint64_t dropped[STORE_DROP_COUNT]) {
  for (int i = 0; i < STORE_DROP_COUNT; i++)
    atomic_fetch_add(&g_sdk_dropped[i], dropped[i]);
}

void metrics_loop_stats(const store_loop_stats_t *stats) {
  atomic_fetch_add(&g_loop_batches, 1);
  atomic_fetch_add(&g_loop_watched_ms, stats->watched_ns / 1000000);
}

static void put_loop_stats(text_t *t) {
  put_counter(t, "perf_collector_loop_stats_batches_total",
              "Batches stored with the watched loop's stats.", atomic_load(&g_loop_batches));
  put(t,
      "# HELP perf_collector_loop_watched_seconds_total Time the SDKs watched their loops, "
      "summed over the batches stored (the denominator of hangs per hour).\n"
      "# TYPE perf_collector_loop_watched_seconds_total counter\n"
      "perf_collector_loop_watched_seconds_total %.3f\n",
      (double)atomic_load(&g_loop_watched_ms) / 1000.0);
}

static void put_sdk_drops(text_t *t) {
  put(t, "# HELP perf_collector_sdk_events_dropped_total Events the SDKs dropped before sending, "
         "by reason, summed over the batches stored.\n"
         "# TYPE perf_collector_sdk_events_dropped_total counter\n");
  for (int i = 0; i < STORE_DROP_COUNT; i++)
    put(t, "perf_collector_sdk_events_dropped_total{reason=\"%s\"} %llu\n",
        store_drop_name((enum store_drop_reason)i),
        (unsigned long long)atomic_load(&g_sdk_dropped[i]));
}

void metrics_frames_symbolized(uint64_t named, uint64_t unnamed) {
  atomic_fetch_add(&g_frames_named, named);
  atomic_fetch_add(&g_frames_unnamed, unnamed);
}

void metrics_stacks_resymbolized(uint64_t stacks) {
  atomic_fetch_add(&g_resymbolized, stacks);
}

void metrics_debuginfod_deferred(void) {
  atomic_fetch_add(&g_debuginfod_deferred, 1);
}

void metrics_alert(const char *state) {
  for (size_t i = 0; i < N_ALERT_STATES; i++)
    if (strcmp(state, ALERT_STATES[i]) == 0) atomic_fetch_add(&g_alerts[i], 1);
}

void metrics_alert_evaluation_dropped(void) {
  atomic_fetch_add(&g_alert_evaluations_dropped, 1);
}

static void put_alerts(text_t *t) {
  put(t, "# HELP perf_collector_alerts_total Alerts the rules raised, by how they ended: delivered "
         "(a 2xx), failed (the retries spent), suppressed (past --alert-rate).\n"
         "# TYPE perf_collector_alerts_total counter\n");
  for (size_t i = 0; i < N_ALERT_STATES; i++)
    put(t, "perf_collector_alerts_total{state=\"%s\"} %llu\n", ALERT_STATES[i],
        (unsigned long long)atomic_load(&g_alerts[i]));
  put_counter(t, "perf_collector_alert_evaluations_dropped_total",
              "Batches whose alert evaluation was dropped: the alert thread's queue was full.",
              atomic_load(&g_alert_evaluations_dropped));
}

static void put_symbols(text_t *t, const store_stats_t *st) {
  put_counter(t, "perf_collector_symbols_uploaded_total",
              "Debug files stored by POST /v1/symbols (new ones).",
              atomic_load(&g_symbols_uploaded));
  put(t,
      "# HELP perf_collector_frames_symbolized_total Frames the device did not name, by whether "
      "a debug file named them at ingest.\n# TYPE perf_collector_frames_symbolized_total counter\n"
      "perf_collector_frames_symbolized_total{result=\"resolved\"} %llu\n"
      "perf_collector_frames_symbolized_total{result=\"unresolved\"} %llu\n",
      (unsigned long long)atomic_load(&g_frames_named),
      (unsigned long long)atomic_load(&g_frames_unnamed));
  put_counter(t, "perf_collector_stacks_resymbolized_total",
              "Stored stacks renamed when their symbols arrived later.",
              atomic_load(&g_resymbolized));
  put_counter(t, "perf_collector_debuginfod_deferred_total",
              "debuginfod fetches left to another collector on the database fetching the same "
              "build-id.",
              atomic_load(&g_debuginfod_deferred));
  put(t,
      "# HELP perf_collector_stacks Distinct stacks stored.\n"
      "# TYPE perf_collector_stacks gauge\nperf_collector_stacks %llu\n",
      (unsigned long long)st->stacks);
}

char *metrics_render(const store_stats_t *st) {
  text_t t = {malloc(4096), 0, 4096, 0};
  if (!t.buf) return NULL;
  put_counter(&t, "perf_collector_batches_accepted_total", "Batches stored.",
              atomic_load(&g_accepted));
  put_counter(&t, "perf_collector_batches_duplicate_total",
              "Repeated batch ids acknowledged without storing.", atomic_load(&g_duplicates));
  put_rejections(&t);
  put_counter(&t, "perf_collector_events_total", "Events stored.", atomic_load(&g_events));
  put_counter(&t, "perf_collector_samples_total", "Stack samples stored.", atomic_load(&g_samples));
  put_sdk_drops(&t);
  put_loop_stats(&t);
  put(&t,
      "# HELP perf_collector_db_bytes Size of the store on disk.\n"
      "# TYPE perf_collector_db_bytes gauge\nperf_collector_db_bytes %llu\n",
      (unsigned long long)st->db_bytes);
  put(&t,
      "# HELP perf_collector_db_lost 1 once the --db path no longer names the database open "
      "(deleted or replaced): ingest answers 503 until a restart.\n"
      "# TYPE perf_collector_db_lost gauge\nperf_collector_db_lost %d\n",
      st->lost ? 1 : 0);
  put_histogram(&t);
  put_counter(&t, "perf_collector_requests_expired_total",
              "Connections closed at their request deadline (--request-timeout).",
              atomic_load(&g_expired));
  put_symbols(&t, st);
  put_alerts(&t);
  if (t.failed) {
    free(t.buf);
    return NULL;
  }
  return t.buf;
}
