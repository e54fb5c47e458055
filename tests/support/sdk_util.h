/*
 * sdk_util.h - what the test programs that run the SDK share: the settings
 * of short hangs and of an upload to a test collector, the SDK's counters,
 * and a wait on them with a deadline (never a sleep that hopes). Nothing
 * here warms the SDK up: the tests meet it as apps do. Static inline: a
 * program uses what it needs.
 */
#ifndef PERF_TEST_SDK_UTIL_H
#define PERF_TEST_SDK_UTIL_H

#include <stdint.h>

#include "check.h"
#include "perf_sdk.h"

/* perf_sdk_config_init, then short hangs: from 20 ms, sampled every 5 ms
   (at most 200), no CPU events. The caller sets the rest. */
static inline void sdk_config_short_hangs(perf_sdk_config_t *cfg) {
  perf_sdk_config_init(cfg);
  cfg->hang_threshold_ms = 20;
  cfg->hang_sample_interval_ms = 5;
  cfg->hang_max_samples = 200;
  cfg->cpu_threshold_percent = 25600; /* no CPU events */
}

/* app version 1.0 uploading to the test collector at url with api_key
   (the http sink), its data in data_dir, each batch closed within 200 ms. */
static inline void sdk_config_upload(perf_sdk_config_t *cfg, const char *app, const char *url,
                                     const char *api_key, const char *data_dir) {
  cfg->app_name = app;
  cfg->app_version = "1.0";
  cfg->sink = PERF_SINK_HTTP;
  cfg->endpoint = url;
  cfg->api_key = api_key;
  cfg->data_dir = data_dir;
  cfg->batch_max_delay_ms = 200;
}

/* The running SDK's counters. */
static inline perf_sdk_stats_t sdk_stats(void) {
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  return st;
}

/* Poll the counters (into `st`) every poll_ms until `cond` holds, failing
   after wait_ms (with test_util.h's now_ms and sleep_ms). */
#define SDK_WAIT_FOR_STATS(st, cond, wait_ms, poll_ms)                                             \
  do {                                                                                             \
    long long wait_deadline_ = now_ms() + (wait_ms);                                               \
    for (;;) {                                                                                     \
      (st) = sdk_stats();                                                                          \
      if (cond) break;                                                                             \
      CHECKF(now_ms() < wait_deadline_, "waited %d ms for %s", (int)(wait_ms), #cond);             \
      sleep_ms(poll_ms);                                                                           \
    }                                                                                              \
  } while (0)

#endif
