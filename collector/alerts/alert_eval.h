/*
 * alert_eval.h - what the stored data says now for one app and version
 * against the alert rules: the alerts the rules raise, each with its key
 * (what it is about, so it is raised once), a one-line summary, the
 * dashboard's link to the view and its figures. Reads the store only
 * (alert_engine.c claims and delivers). Runs on the alert thread.
 *
 * - new_group: a hang group or CPU group (stack) an event of the app's
 *   batches named that no event of its kind named in a batch received
 *   before the rule was made (store.h new_groups); key "new_group:KIND:SIG".
 * - hang_rate_regression: the version's hangs per watched hour against
 *   the previous version's (the one whose first batch arrived before),
 *   both with enough data (rate_enough_data) and the version's 95% Garwood
 *   interval wholly above the previous one's; key
 *   "hang_rate_regression:PREV:VERSION".
 * - share_regression: a group's share of the version's hangs (hang: its
 *   events of all hang events) or CPU samples (cpu: its samples of all)
 *   against its share in the previous version, each side at least
 *   RATE_MIN_COUNT in all, the version's 95% Clopper-Pearson interval
 *   wholly above the previous one's; key "share_regression:KIND:SIG:PREV:VERSION".
 */
#ifndef PERF_COLLECTOR_ALERT_EVAL_H
#define PERF_COLLECTOR_ALERT_EVAL_H

#include <jansson.h>
#include <stdint.h>

#include "collector/store/store.h"

/* How far back new_group reads the batches received (the groups they
   name): from the previous evaluation of the app less ALERT_SCAN_SLACK_NS
   (a batch is stamped before its transaction commits: one that took
   longer than the slack to commit is not read), or ALERT_SCAN_NS for an
   app not evaluated before (since the collector started). */
#define ALERT_SCAN_NS INT64_C(3600000000000)
#define ALERT_SCAN_SLACK_NS INT64_C(60000000000)

typedef struct alert_s {
  const store_alert_rule_t *rule;
  const char *app, *key, *summary, *link; /* link "" without a public URL */
  json_t *details;                        /* the figures: the payload's "details" */
} alert_t;

typedef void (*alert_fn)(const alert_t *alert, void *user);

/* The alerts rules[0..n) raise for app (and version: NULL or "" only
   new_group rules are evaluated), new_group reading the batches received
   since scan_ns, to fn once every read is over (fn may use the store),
   the rules in their order. public_url: the links' base (NULL: links
   ""). STORE_OK, or the first read's failure. */
int alert_evaluate(const store_ops_t *ops, store_t *store, const char *public_url,
                   const store_alert_rule_t *rules, size_t n, const char *app, const char *version,
                   int64_t scan_ns, alert_fn fn, void *user);

#endif
