/*
 * test_config_abi.c - perf_sdk_config_t can grow without breaking apps
 * built against an older perf_sdk.h. This program is such an app: it fills
 * and passes the config in the previous layout (0.1.0 before
 * exit_timeout_ms was added: old_config_t below is that layout), through
 * libperfsdk.so as apps link it. Also: a layout newer than the library, and
 * a config never filled by perf_sdk_config_init, are refused with a log
 * line naming struct_size. perf_sdk_stats_t likewise: an app with the
 * previous, shorter layout gets the fields it knows.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "check.h"
#include "perf_sdk.h"
#include "tempdir.h"
#include "test_util.h"

/* perf_sdk_config_t as the previous perf_sdk.h declared it. */
typedef struct {
  size_t struct_size;
  const char *app_name, *app_version, *environment;
  perf_tag_t tags[PERF_MAX_TAGS];
  perf_sink_t sink;
  const char *sink_path, *data_dir, *endpoint, *api_key;
  unsigned hang_threshold_ms, hang_sample_interval_ms, hang_max_samples;
  unsigned cpu_threshold_percent, cpu_window_ms, cpu_sample_hz, cpu_burst_ms, cpu_top_threads,
      cpu_cooldown_ms;
  unsigned max_events_per_hour, queue_capacity;
  unsigned batch_max_bytes, batch_max_delay_ms, zstd_level, symbolize;
  unsigned spool_max_bytes, spool_max_files, spool_max_age_s;
  unsigned connect_timeout_ms, request_timeout_ms, backoff_base_ms, backoff_cap_ms,
      max_server_errors, tls_verify;
  const char *ca_bundle;
  perf_log_fn log_fn;
  void *log_user;
} old_config_t;

/* The old struct with guard bytes right after it: the library must not
   write past the size the app gave. */
typedef struct {
  old_config_t cfg;
  unsigned char guard[64];
} guarded_t;

static char g_log[1024];

static void keep_log(perf_log_level_t level, const char *msg, void *user) {
  (void)user;
  (void)level;
  snprintf(g_log, sizeof g_log, "%s", msg);
}

static void case_old_layout_runs(void) {
  _Static_assert(sizeof(old_config_t) < sizeof(perf_sdk_config_t), "the old layout is shorter");
  guarded_t g;
  memset(g.guard, 0xa5, sizeof g.guard);
  perf_sdk_config_init_sized((perf_sdk_config_t *)&g.cfg, sizeof g.cfg);
  for (size_t i = 0; i < sizeof g.guard; i++)
    CHECKF(g.guard[i] == 0xa5, "perf_sdk_config_init wrote past the old layout at byte %zu", i);
  CHECK_EQ_INT(g.cfg.struct_size, sizeof(old_config_t));
  CHECK_EQ_INT(g.cfg.hang_threshold_ms, 250);
  CHECK_EQ_INT(g.cfg.zstd_level, 3);
  CHECK(strcmp(g.cfg.environment, "production") == 0);

  char report[256];
  snprintf(report, sizeof report, "%s/report.txt", tempdir_make("abi"));
  g.cfg.sink = PERF_SINK_FILE;
  g.cfg.sink_path = report;
  g.cfg.app_name = "abi-old";
  g.cfg.log_fn = keep_log;
  setenv("XDG_STATE_HOME", tempdir_make("abi"), 1);
  CHECK_EQ_INT(perf_sdk_init((const perf_sdk_config_t *)&g.cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("old layout"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  char *text = read_text(report);
  CHECKF(text && strstr(text, "old layout") && strstr(text, "case_old_layout_runs"),
         "the event is not in the report:\n%s", text ? text : "(none)");
  free(text);
  for (size_t i = 0; i < sizeof g.guard; i++)
    CHECKF(g.guard[i] == 0xa5, "the SDK wrote past the old layout at byte %zu", i);
}

static void case_newer_layout_refused(void) {
  struct {
    perf_sdk_config_t cfg;
    unsigned later_field;
  } newer;
  perf_sdk_config_init_sized(&newer.cfg, sizeof newer);
  newer.later_field = 7;
  newer.cfg.log_fn = keep_log;
  CHECK_EQ_INT(newer.cfg.struct_size, sizeof newer);
  CHECK_EQ_INT(newer.cfg.hang_threshold_ms, 250);
  CHECK_EQ_INT(newer.later_field, 7);
  CHECK_EQ_INT(perf_sdk_init(&newer.cfg), PERF_E_INVALID_CONFIG);
  CHECKF(strstr(g_log, "struct_size") && strstr(g_log, "newer perf_sdk.h"), "log: %s", g_log);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_E_NOT_INITIALIZED);
}

static void case_unfilled_config_refused(void) {
  perf_sdk_config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.log_fn = keep_log;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  CHECKF(strstr(g_log, "struct_size 0") && strstr(g_log, "perf_sdk_config_init"), "log: %s", g_log);
  CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_E_NOT_INITIALIZED);
}

/* perf_sdk_get_stats from an app whose perf_sdk_stats_t ends before the
   CPU burst counters (the previous layout): the fields it knows are
   filled, nothing past them is written; a size that is no layout is
   refused. */
static void case_old_stats_layout(void) {
  enum { OLD_FIELDS = offsetof(perf_sdk_stats_t, cpu_bursts_empty) / sizeof(uint64_t) };
  struct {
    uint64_t field[OLD_FIELDS];
    unsigned char guard[64];
  } old;
  memset(&old, 0xa5, sizeof old);
  char report[256];
  snprintf(report, sizeof report, "%s/stats.txt", tempdir_make("abi"));
  setenv("XDG_STATE_HOME", tempdir_make("abi"), 1);
  perf_sdk_config_t cfg;
  perf_sdk_config_init(&cfg);
  cfg.sink = PERF_SINK_FILE;
  cfg.sink_path = report;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("stats"), PERF_OK);
  CHECK_EQ_INT(perf_sdk_flush(10000), PERF_OK);
  perf_sdk_stats_t *as_new = (perf_sdk_stats_t *)(void *)&old;
  CHECK_EQ_INT(perf_sdk_get_stats_sized(as_new, sizeof old.field), PERF_OK);
  CHECK_EQ_INT(old.field[offsetof(perf_sdk_stats_t, events_recorded) / sizeof(uint64_t)], 1);
  for (size_t i = 0; i < sizeof old.guard; i++)
    CHECKF(old.guard[i] == 0xa5, "perf_sdk_get_stats wrote past the old layout at byte %zu", i);
  CHECK_EQ_INT(perf_sdk_get_stats_sized(as_new, 12), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_get_stats_sized(as_new, 0), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

static const test_case_t g_cases[] = {
    TEST_CASE(old_stats_layout),
    TEST_CASE(old_layout_runs),
    TEST_CASE(newer_layout_refused),
    TEST_CASE(unfilled_config_refused),
};

int main(int argc, char **argv) {
  return test_main(g_cases, sizeof g_cases / sizeof g_cases[0], argc, argv);
}
