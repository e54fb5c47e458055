/*
 * sdk_log.h - the SDK's log lines kept in one text (a log_fn for
 * perf_sdk_config_t), for tests that look for what the SDK said or print
 * it when a check fails. Lines past the buffer's size are cut. Read g_log
 * once the SDK is shut down or quiet; while it runs, under g_log_lock.
 */
#ifndef PERF_TEST_SDK_LOG_H
#define PERF_TEST_SDK_LOG_H

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "perf_sdk.h"

static char g_log[16384];
static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER;

/* perf_sdk_config_t.log_fn: each message and a newline. */
static inline void sdk_log_keep(perf_log_level_t level, const char *message, void *user) {
  (void)level, (void)user;
  pthread_mutex_lock(&g_log_lock);
  size_t used = strlen(g_log);
  snprintf(g_log + used, sizeof g_log - used, "%s\n", message);
  pthread_mutex_unlock(&g_log_lock);
}

static inline void sdk_log_clear(void) {
  pthread_mutex_lock(&g_log_lock);
  g_log[0] = '\0';
  pthread_mutex_unlock(&g_log_lock);
}

#endif
