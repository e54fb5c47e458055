/*
 * config.h - turns the app's perf_sdk_config_t (plus PERF_SDK_* environment
 * overrides) into the SDK's own validated copy. Runs on the thread calling
 * perf_sdk_init.
 */
#ifndef PERF_CONFIG_H
#define PERF_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "perf_sdk.h"

/* The allowed range of hang_threshold_ms, also of a registered loop's own
   threshold (perf_sdk_loop_register). */
#define PERF__HANG_THRESHOLD_MIN_MS 20
#define PERF__HANG_THRESHOLD_MAX_MS 60000

typedef struct perf__tag_s {
  char *key, *value;
} perf__tag_t;

/* The validated configuration; every string is owned (NULL when unset). */
typedef struct perf__config_s {
  char *app_name, *app_version, *environment;
  perf__tag_t tags[PERF_MAX_TAGS];
  size_t tag_count;
  perf_sink_t sink;
  char *sink_path, *data_dir, *endpoint, *api_key;
  unsigned hang_threshold_ms, hang_sample_interval_ms, hang_max_samples;
  unsigned cpu_threshold_percent, cpu_window_ms, cpu_sample_hz, cpu_burst_ms, cpu_top_threads,
      cpu_cooldown_ms;
  unsigned cpu_profile_hz, cpu_profile_budget_permille; /* the continuous profile (0 Hz: off) */
  unsigned max_events_per_hour, queue_capacity;
  unsigned batch_max_bytes, batch_max_delay_ms, zstd_level, symbolize;
  unsigned spool_max_bytes, spool_max_files, spool_max_age_s;
  unsigned connect_timeout_ms, request_timeout_ms, backoff_base_ms, backoff_cap_ms,
      max_server_errors, tls_verify;
  unsigned exit_timeout_ms;
  unsigned upload_stall_warn_s; /* 0: never */
  char *ca_bundle;
  char *upload_helper; /* NULL: the installed one */
  perf_log_fn log_fn;
  void *log_user;
} perf__config_t;

/* Apply the environment to a copy of *in, validate it and copy it into
   *out. *disabled is set when PERF_SDK_DISABLED is true (then *out is
   left empty and 0 returned). Errors: PERF_E_INVALID_CONFIG (logged,
   naming the field or variable and the allowed values; with strict_env
   also an unknown PERF_SDK_* name or an unparseable PERF_SDK_DISABLED),
   PERF_E_NO_MEMORY. Without strict_env those two are logged (a warning,
   an error) and init goes on; quiet_env holds them back (the front checks
   the config before the core checks it again, and logs them only where
   the core will not: perf__config_env_warn). */
int perf__config_resolve(const perf_sdk_config_t *in, perf__config_t *out, bool *disabled,
                         bool quiet_env);

/* Log what perf__config_resolve held back with quiet_env: the unknown
   PERF_SDK_* names and an unparseable PERF_SDK_DISABLED (nothing with
   strict_env: those were errors). */
void perf__config_env_warn(const perf_sdk_config_t *in);

void perf__config_free(perf__config_t *cfg);

#endif
