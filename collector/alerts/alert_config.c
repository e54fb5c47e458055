/*
 * alert_config.c - the alert options' defaults (see alert_config.h).
 */
#include "collector/alerts/alert_config.h"

#include <string.h>

void alert_config_default(alert_config_t *c) {
  memset(c, 0, sizeof *c);
  c->per_minute = 10;
  c->timeout_s = 5;
  c->retries = 3;
  c->backoff_ms = 1000;
}
