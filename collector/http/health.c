/*
 * health.c - GET /healthz's answer (see health.h).
 */
#include "collector/http/health.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* The backends' reasons begin with their state; one that does not is
   "unavailable". */
static bool has_state(const char *why) {
  static const char *const STATES[] = {"unavailable: ", "disk full: ", "locked: "};
  for (size_t i = 0; i < sizeof STATES / sizeof STATES[0]; i++)
    if (strncmp(why, STATES[i], strlen(STATES[i])) == 0) return true;
  return false;
}

unsigned health_answer(const store_ops_t *ops, store_t *store, const job_load_t *load, char *text,
                       size_t len) {
  char why[4608]; /* a path and its reason */
  why[0] = '\0';
  int rc = ops->health ? ops->health(store, why, sizeof why) : ops->check(store, why, sizeof why);
  if (rc == STORE_LOST) {
    snprintf(text, len, "lost: %s", why);
    return 503;
  }
  if (rc != STORE_OK) {
    snprintf(text, len, "%s%s", has_state(why) ? "" : "unavailable: ", why);
    return 503;
  }
  if (load->oldest_running_ns >= (int64_t)HEALTH_SLOW_S * 1000000000) {
    snprintf(text, len,
             "slow: a batch has been in the store for %.1f s (%d s or more); %zu batches in the "
             "store, %zu waiting",
             (double)load->oldest_running_ns / 1e9, HEALTH_SLOW_S, load->running, load->waiting);
    return 503;
  }
  snprintf(text, len, "ok");
  return 200;
}
