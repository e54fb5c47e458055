/*
 * alert_payload.h - an alert as the body a webhook receives: "json" (the
 * alert's own object: alert kind, rule, key, app, summary, link, details)
 * or "slack" (an incoming webhook's message: text and a section block,
 * the link as Slack's <url|label>). Pure: no I/O.
 */
#ifndef PERF_COLLECTOR_ALERT_PAYLOAD_H
#define PERF_COLLECTOR_ALERT_PAYLOAD_H

#include "collector/alerts/alert_eval.h"

/* The body for a->rule's format (malloc'ed JSON text, the caller frees
   it); NULL when out of memory. */
char *alert_payload(const alert_t *a);

#endif
