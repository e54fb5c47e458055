/*
 * test_env_doors.c - what a newcomer's first hour meets, through
 * libperfsdk.so as apps link it: a PERF_SDK_* variable the SDK does not
 * know (a misspelling) logged once per init naming it and the nearest
 * known name, the spellings of a boolean, an unparseable PERF_SDK_DISABLED
 * logged naming variable and value, strict_env (and PERF_SDK_STRICT_ENV)
 * making both fail init, the upload stall warning's field checked,
 * perf_sdk_version; and the front beside a core of another version (a
 * test-only build of the core in PERF_TEST_CORES_DIR/core-<version>/ with
 * a copy of the front): another MAJOR.MINOR refused naming both versions,
 * another PATCH used. Each case runs in its own process:
 * `test_env_doors <case>`.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "perf_sdk.h"
#include "tempdir.h"
#include "test_util.h"

#define CORE_NAME "libperfsdk-core.so"
#define SPELLINGS "(1, 0, true, false, yes, no, on or off)"

static char g_log[32][512];
static perf_log_level_t g_level[32];
static int g_count;

static pthread_mutex_t g_log_lock = PTHREAD_MUTEX_INITIALIZER; /* SDK threads log too */

static void keep_log(perf_log_level_t level, const char *msg, void *user) {
  (void)user;
  pthread_mutex_lock(&g_log_lock);
  if (g_count < 32) {
    g_level[g_count] = level;
    snprintf(g_log[g_count++], sizeof g_log[0], "%s", msg);
  }
  pthread_mutex_unlock(&g_log_lock);
}

/* How many messages at `level` are exactly `text` (or, with prefix, start
   with it). */
static int logged_as(perf_log_level_t level, const char *text, bool prefix) {
  int n = 0;
  pthread_mutex_lock(&g_log_lock);
  for (int i = 0; i < g_count; i++)
    n += g_level[i] == level &&
         (prefix ? strncmp(g_log[i], text, strlen(text)) == 0 : strcmp(g_log[i], text) == 0);
  pthread_mutex_unlock(&g_log_lock);
  return n;
}

static int logged(perf_log_level_t level, const char *text) {
  return logged_as(level, text, false);
}

static void dump_log(void) {
  for (int i = 0; i < g_count; i++)
    fprintf(stderr, "  log[%d]: %s\n", (int)g_level[i], g_log[i]);
}

#define EXPECT_LOGGED(level, text)                                                                 \
  do {                                                                                             \
    if (logged((level), (text)) != 1) {                                                            \
      fprintf(stderr, "%s:%d: not logged once at level %d: %s\nlog:\n", __FILE__, __LINE__,        \
              (int)(level), (text));                                                               \
      dump_log();                                                                                  \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static bool maps_contain(const char *name) {
  char *maps = read_text("/proc/self/maps");
  bool found = maps && strstr(maps, name) != NULL;
  free(maps);
  return found;
}

static void base_config(perf_sdk_config_t *cfg) {
  perf_sdk_config_init(cfg);
  cfg->app_name = "env-doors";
  cfg->data_dir = tempdir_make("env-doors");
  cfg->log_fn = keep_log;
  g_count = 0;
}

static void init_and_stop(perf_sdk_config_t *cfg) {
  CHECK_EQ_INT(perf_sdk_init(cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

/* ---- unknown names ----------------------------------------------------------- */

static void case_unknown_name_near(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg);
  setenv("PERF_SDK_ENDPIONT", "http://127.0.0.1:1", 1);
  init_and_stop(&cfg);
  /* Once, though the front and the core both check the configuration. */
  EXPECT_LOGGED(PERF_LOG_WARN, "PERF_SDK_ENDPIONT is not a perf sdk environment variable (did you "
                               "mean PERF_SDK_ENDPOINT?); it is ignored");
  base_config(&cfg);
  setenv("PERF_SDK_HANG_TRESHOLD_MS", "100", 1);
  unsetenv("PERF_SDK_ENDPIONT");
  init_and_stop(&cfg);
  EXPECT_LOGGED(PERF_LOG_WARN, "PERF_SDK_HANG_TRESHOLD_MS is not a perf sdk environment variable "
                               "(did you mean PERF_SDK_HANG_THRESHOLD_MS?); it is ignored");
  CHECK_EQ_INT(g_count, 2); /* and "started" */
}

static void case_unknown_name_far(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg);
  setenv("PERF_SDK_FROBNICATE", "1", 1);
  setenv("PERF_SDK_SAMPLE_SIGNAL", "", 1); /* known, read by the sampler */
  init_and_stop(&cfg);
  EXPECT_LOGGED(PERF_LOG_WARN, "PERF_SDK_FROBNICATE is not a perf sdk environment variable; it is "
                               "ignored");
  CHECK_EQ_INT(g_count, 2);
}

/* A configuration the front rejects (the core never loads): the error,
   and the unknown name all the same. */
static void case_unknown_name_rejected_config(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg);
  cfg.hang_threshold_ms = 1;
  setenv("PERF_SDK_ENDPIONT", "x", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  EXPECT_LOGGED(PERF_LOG_ERROR, "hang_threshold_ms = 1: must be 20..60000");
  EXPECT_LOGGED(PERF_LOG_WARN, "PERF_SDK_ENDPIONT is not a perf sdk environment variable (did you "
                               "mean PERF_SDK_ENDPOINT?); it is ignored");
  CHECK_EQ_INT(g_count, 2);
  CHECK(!maps_contain(CORE_NAME));
}

/* ---- booleans ---------------------------------------------------------------- */

static void case_disabled_spellings(void) {
  const char *on[] = {"1", "true", "yes", "on", "YES", "On", "TRUE"};
  for (size_t i = 0; i < ARRAY_LEN(on); i++) {
    perf_sdk_config_t cfg;
    base_config(&cfg);
    setenv("PERF_SDK_DISABLED", on[i], 1);
    CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
    EXPECT_LOGGED(PERF_LOG_INFO, "perf sdk disabled by PERF_SDK_DISABLED");
    CHECK_EQ_INT(g_count, 1);
    CHECKF(!maps_contain(CORE_NAME), "PERF_SDK_DISABLED=%s loaded the core", on[i]);
    CHECK_EQ_INT(perf_sdk_shutdown(1000), PERF_E_NOT_INITIALIZED);
  }
  const char *off[] = {"0", "false", "no", "off", "NO", "Off"};
  for (size_t i = 0; i < ARRAY_LEN(off); i++) {
    perf_sdk_config_t cfg;
    base_config(&cfg);
    setenv("PERF_SDK_DISABLED", off[i], 1);
    CHECKF(perf_sdk_init(&cfg) == PERF_OK, "PERF_SDK_DISABLED=%s", off[i]);
    CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK); /* running */
    CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  }
}

/* Not a boolean: an error naming variable and value; the SDK stays on. */
static void case_disabled_unparseable(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg);
  setenv("PERF_SDK_DISABLED", "maybe", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  EXPECT_LOGGED(PERF_LOG_ERROR,
                "PERF_SDK_DISABLED=maybe: not a boolean " SPELLINGS "; ignored: the SDK stays on");
}

static void case_boolean_fields(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg);
  setenv("PERF_SDK_SYMBOLIZE", "off", 1);
  setenv("PERF_SDK_TLS_VERIFY", "Yes", 1);
  init_and_stop(&cfg);
  base_config(&cfg);
  setenv("PERF_SDK_TLS_VERIFY", "maybe", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  EXPECT_LOGGED(PERF_LOG_ERROR,
                "PERF_SDK_TLS_VERIFY=maybe: tls_verify must be a boolean " SPELLINGS);
}

/* ---- strict_env -------------------------------------------------------------- */

static void case_strict_env(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg);
  cfg.strict_env = 1;
  setenv("PERF_SDK_ENDPIONT", "x", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  EXPECT_LOGGED(PERF_LOG_ERROR, "PERF_SDK_ENDPIONT is not a perf sdk environment variable (did "
                                "you mean PERF_SDK_ENDPOINT?); strict_env refuses it");
  CHECK_EQ_INT(g_count, 1);
  unsetenv("PERF_SDK_ENDPIONT");

  base_config(&cfg);
  cfg.strict_env = 1;
  setenv("PERF_SDK_DISABLED", "maybe", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  EXPECT_LOGGED(PERF_LOG_ERROR,
                "PERF_SDK_DISABLED=maybe: not a boolean " SPELLINGS "; strict_env refuses it");
  CHECK_EQ_INT(g_count, 1);
  unsetenv("PERF_SDK_DISABLED");
  CHECK(!maps_contain(CORE_NAME));

  /* The variable, as every one, wins over the code. */
  base_config(&cfg);
  setenv("PERF_SDK_STRICT_ENV", "on", 1);
  setenv("PERF_SDK_SINK_PAHT", "x", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  EXPECT_LOGGED(PERF_LOG_ERROR, "PERF_SDK_SINK_PAHT is not a perf sdk environment variable (did "
                                "you mean PERF_SDK_SINK_PATH?); strict_env refuses it");
  base_config(&cfg);
  setenv("PERF_SDK_STRICT_ENV", "maybe", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  EXPECT_LOGGED(PERF_LOG_ERROR,
                "PERF_SDK_STRICT_ENV=maybe: strict_env must be a boolean " SPELLINGS);
  unsetenv("PERF_SDK_SINK_PAHT");
  base_config(&cfg);
  cfg.strict_env = 1;
  setenv("PERF_SDK_STRICT_ENV", "0", 1); /* off, whatever the code says */
  setenv("PERF_SDK_ENDPIONT", "x", 1);
  init_and_stop(&cfg);
  EXPECT_LOGGED(PERF_LOG_WARN, "PERF_SDK_ENDPIONT is not a perf sdk environment variable (did you "
                               "mean PERF_SDK_ENDPOINT?); it is ignored");
}

/* ---- the upload stall warning's field ---------------------------------------- */

static void case_stall_field_checked(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg);
  CHECK_EQ_INT(cfg.upload_stall_warn_s, 60);
  CHECK_EQ_INT(cfg.strict_env, 0);
  cfg.upload_stall_warn_s = 86401;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  EXPECT_LOGGED(PERF_LOG_ERROR, "upload_stall_warn_s = 86401: must be 0..86400");
  base_config(&cfg);
  setenv("PERF_SDK_UPLOAD_STALL_WARN_S", "soon", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_E_INVALID_CONFIG);
  EXPECT_LOGGED(PERF_LOG_ERROR, "PERF_SDK_UPLOAD_STALL_WARN_S=soon: upload_stall_warn_s must be "
                                "an integer in 0..86400");
  base_config(&cfg);
  setenv("PERF_SDK_UPLOAD_STALL_WARN_S", "0", 1);
  init_and_stop(&cfg);
}

/* The field reaches the uploader: the http sink against a port nobody
   listens on, PERF_SDK_UPLOAD_STALL_WARN_S=1, one manual event: one
   warning, from the uploader thread, about a second after the first
   refused attempt. */
static void case_stall_warning_through_sdk(void) {
  perf_sdk_config_t cfg;
  base_config(&cfg);
  cfg.sink = PERF_SINK_HTTP;
  cfg.endpoint = "http://127.0.0.1:1";
  cfg.batch_max_delay_ms = 100;
  cfg.backoff_base_ms = 100;
  cfg.backoff_cap_ms = 200;
  setenv("PERF_SDK_UPLOAD_STALL_WARN_S", "1", 1);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  CHECK_EQ_INT(perf_sdk_capture_now("stall"), PERF_OK);
  const char *want = "no batch has reached the collector for 1 s (they wait in the spool): the "
                     "collector at http://127.0.0.1:1/v1/batches is down or refuses connections; "
                     "check that it runs and listens at that host and port (";
  int64_t deadline = now_ms() + 20000;
  while (logged_as(PERF_LOG_WARN, want, true) == 0 && now_ms() < deadline)
    usleep(10000);
  CHECK_EQ_INT(perf_sdk_shutdown(2000), PERF_OK);
  if (logged_as(PERF_LOG_WARN, want, true) != 1) {
    fprintf(stderr, "not logged once: %s...\nlog:\n", want);
    dump_log();
    exit(1);
  }
}

/* ---- versions ---------------------------------------------------------------- */

static void case_version(void) {
  CHECK(strcmp(perf_sdk_version(), PERF_SDK_VERSION) == 0);
  char want[32];
  snprintf(want, sizeof want, "%d.%d.%d", PERF_SDK_VERSION_MAJOR, PERF_SDK_VERSION_MINOR,
           PERF_SDK_VERSION_PATCH);
  CHECK(strcmp(want, PERF_SDK_VERSION) == 0);
  CHECK_EQ_INT(PERF_SDK_VERSION_NUMBER, PERF_SDK_VERSION_MAJOR * 10000 +
                                            PERF_SDK_VERSION_MINOR * 100 + PERF_SDK_VERSION_PATCH);
}

typedef int (*init_fn)(const perf_sdk_config_t *);

/* The front copied beside the test core of `version`, loaded on its own. */
static void *other_front(const char *version, char dir[256]) {
  snprintf(dir, 256, "%s/core-%s", PERF_TEST_CORES_DIR, version);
  char path[512];
  snprintf(path, sizeof path, "%s/libperfsdk.so.0", dir);
  void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  CHECKF(h != NULL, "dlopen %s: %s", path, dlerror());
  return h;
}

static void case_front_refuses_other_minor(void) {
  char dir[256], want[1024];
  void *front = other_front("0.9.0", dir);
  init_fn init = (init_fn)(uintptr_t)dlsym(front, "perf_sdk_init");
  const char *(*version)(void) = (const char *(*)(void))(uintptr_t)dlsym(front, "perf_sdk_version");
  CHECK(init && version && strcmp(version(), PERF_SDK_VERSION) == 0);
  perf_sdk_config_t cfg;
  base_config(&cfg);
  CHECK_EQ_INT(init(&cfg), PERF_E_UNSUPPORTED);
  snprintf(want, sizeof want,
           "perf sdk: libperfsdk.so is version %s but %s/libperfsdk-core.so.0 is version 0.9.0: "
           "the front and its core must have the same major.minor version; install both from one "
           "build",
           PERF_SDK_VERSION, dir);
  EXPECT_LOGGED(PERF_LOG_ERROR, want);
  CHECK_EQ_INT(g_count, 1);
  CHECK_EQ_INT(init(&cfg), PERF_E_UNSUPPORTED); /* and every time after */
}

static void case_front_uses_other_patch(void) {
  char dir[256], want[1024];
  void *front = other_front("0.1.7", dir);
  init_fn init = (init_fn)(uintptr_t)dlsym(front, "perf_sdk_init");
  int (*shutdown)(int) = (int (*)(int))(uintptr_t)dlsym(front, "perf_sdk_shutdown");
  CHECK(init && shutdown);
  perf_sdk_config_t cfg;
  base_config(&cfg);
  CHECK_EQ_INT(init(&cfg), PERF_OK);
  CHECK_EQ_INT(shutdown(5000), PERF_OK);
  snprintf(want, sizeof want,
           "perf sdk: libperfsdk.so is version %s, %s/libperfsdk-core.so.0 is version 0.1.7: used "
           "(the same major.minor)",
           PERF_SDK_VERSION, dir);
  EXPECT_LOGGED(PERF_LOG_INFO, want);
}

static const test_case_t g_cases[] = {
    TEST_CASE(unknown_name_near),
    TEST_CASE(unknown_name_far),
    TEST_CASE(unknown_name_rejected_config),
    TEST_CASE(disabled_spellings),
    TEST_CASE(disabled_unparseable),
    TEST_CASE(boolean_fields),
    TEST_CASE(strict_env),
    TEST_CASE(stall_field_checked),
    TEST_CASE(stall_warning_through_sdk),
    TEST_CASE(version),
    TEST_CASE(front_refuses_other_minor),
    TEST_CASE(front_uses_other_patch),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
