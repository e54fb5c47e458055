/*
 * alert_config.h - how the collector raises and delivers alerts: the
 * dashboard's public address for the links, the hosts a webhook may name,
 * the rate per rule, the webhook's timeout and retries (the flags of
 * docs/operations.md "Alerts"). Filled by main.c, read-only afterwards.
 */
#ifndef PERF_COLLECTOR_ALERT_CONFIG_H
#define PERF_COLLECTOR_ALERT_CONFIG_H

#include <stddef.h>

#define ALERT_ALLOW_MAX 16 /* --alert-allow flags */

typedef struct alert_config_s {
  const char *public_url;             /* --public-url: the dashboard's base; NULL: no links */
  const char *allow[ALERT_ALLOW_MAX]; /* --alert-allow: the hosts a webhook URL may name */
  size_t n_allow;
  unsigned per_minute; /* --alert-rate: alerts one rule sends a minute; past it suppressed */
  unsigned timeout_s;  /* --alert-timeout: one POST's whole time */
  unsigned retries;    /* --alert-retries: POSTs after the first on a 5xx, 429 or no answer */
  unsigned backoff_ms; /* --alert-backoff-ms: the first retry's wait, doubled at each */
} alert_config_t;

/* The defaults: no public URL, no host allowed (no rule can be made),
   10 a minute, 5 s, 3 retries from 1 s. */
void alert_config_default(alert_config_t *c);

#endif
