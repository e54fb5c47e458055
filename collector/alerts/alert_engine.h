/*
 * alert_engine.h - the alert thread ("perf-alerts"): ingest tells it the
 * app and version of each batch stored (alert_engine_notify, never
 * waiting), and it evaluates the rules for them (alert_eval.h), raises
 * each alert once (the store's alert_claim, by key), suppresses a rule's
 * alerts past --alert-rate a minute (stored as "suppressed", never sent),
 * and delivers the others to their webhooks (alert_payload.h,
 * alert_send.h) with retries and a doubling backoff on 5xx, 429 or no
 * answer, each alert's state, status and attempts stored as they change.
 * The queue of (app, version) pairs is bounded: a pair already queued is
 * not queued again, and past ALERT_QUEUE_MAX pairs a notification is
 * dropped and counted (perf_collector_alert_evaluations_dropped_total; the
 * next batch of that app and version brings it back). Each alert's end
 * is counted by state (perf_collector_alerts_total). Ingest never waits for a webhook.
 */
#ifndef PERF_COLLECTOR_ALERT_ENGINE_H
#define PERF_COLLECTOR_ALERT_ENGINE_H

#include <stdint.h>

#include "collector/alerts/alert_config.h"
#include "collector/store/store.h"

#define ALERT_QUEUE_MAX 256

typedef struct alert_engine_s alert_engine_t;

/* The thread started on ops/store with cfg (kept: it must outlive the
   engine); NULL when it could not start (said on stderr). */
alert_engine_t *alert_engine_start(const store_ops_t *ops, store_t *store,
                                   const alert_config_t *cfg);

/* A batch of app (and version, NULL or "" for none) was stored: queue its
   evaluation. Any thread; never blocks on I/O. e NULL: nothing. */
void alert_engine_notify(alert_engine_t *e, const char *app, const char *version);

/* Stop the thread (a delivery in flight ends at its timeout, waits are
   cut short; alerts left pending stay so in the store) and free it. */
void alert_engine_stop(alert_engine_t *e);

#endif
