/*
 * test_dashboard.c - the collector's web dashboard in a real browser (ctest
 * dashboard_browser). Starts the real perf-collector (collector_rig.c: a
 * free port, a temp db, an API keys file), fills it with real batches by
 * running the real demo app (samples/demo_app, sink = http: a ~1 s hang in
 * checksum_profile_slowly, a CPU burn in convolve_kernel), waits until the
 * hang and the cpu event are stored, then runs tests/dashboard/
 * dashboard_test.mjs (node + playwright-core + Debian's chromium, headless)
 * against it and requires its exit 0 and its screenshot. A missing node,
 * chromium or playwright-core fails the test: it never skips.
 */
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "collector_rig.h"
#include "tempdir.h"

#define CHROMIUM_PATH "/usr/bin/chromium"
#define DEMO_DEADLINE_S 120    /* the demo runs ~5 s; much longer on a loaded machine */
#define STORED_DEADLINE_S 60   /* its batches are sent by shutdown; allow retries */
#define BROWSER_DEADLINE_S 240 /* node + chromium start, then ~3 s of steps */

static pid_t g_child; /* demo_app or node while one runs: killed if a check fails */

static void kill_child(void) {
  if (g_child > 0) kill(g_child, SIGKILL), waitpid(g_child, NULL, 0);
}

/* Wait for the child (g_child) up to seconds; its exit status, or -1 when
   it had to be killed. */
static int wait_child(double seconds) {
  double end = now_s() + seconds;
  int st = 0;
  while (waitpid(g_child, &st, WNOHANG) == 0) {
    if (now_s() > end) {
      kill_child();
      g_child = 0;
      return -1;
    }
    usleep(100000);
  }
  g_child = 0;
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The demo app with its uploader pointed at c (the SDK reads PERF_SDK_*
   from the environment it inherits). */
static void run_demo(const collector_t *c, const char *dir) {
  char data_dir[160], log[160];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", dir);
  snprintf(log, sizeof log, "%s/demo_app.log", dir);
  CHECK(setenv("PERF_SDK_SINK", "http", 1) == 0);
  CHECK(setenv("PERF_SDK_ENDPOINT", c->url, 1) == 0);
  CHECK(setenv("PERF_SDK_API_KEY", GOOD_KEY, 1) == 0);
  CHECK(setenv("PERF_SDK_DATA_DIR", data_dir, 1) == 0);
  char *argv[] = {PERF_DEMO_APP_PATH, NULL};
  g_child = spawn(argv, log);
  int status = wait_child(DEMO_DEADLINE_S);
  unsetenv("PERF_SDK_SINK"), unsetenv("PERF_SDK_ENDPOINT");
  unsetenv("PERF_SDK_API_KEY"), unsetenv("PERF_SDK_DATA_DIR");
  if (status != 0) {
    char cmd[200];
    snprintf(cmd, sizeof cmd, "cat '%s' >&2", log);
    CHECK(system(cmd) >= 0);
  }
  CHECKF(status == 0, "demo_app exited with %d", status);
}

/* Events of kind stored by c (polled: the batches arrive asynchronously). */
static size_t stored_events(const collector_t *c, const char *kind) {
  static reply_t r;
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events?kind=%s", kind);
  const char *headers[] = {"Authorization: Bearer " GOOD_KEY, NULL};
  if (request(c, "GET", path, headers, NULL, 0, false, &r) != 200) return 0;
  json_t *j = json_loads(r.body, 0, NULL);
  CHECKF(j != NULL, "GET %s: not JSON: %s", path, r.body);
  size_t n = json_array_size(json_object_get(j, "events"));
  json_decref(j);
  return n;
}

static void wait_stored(const collector_t *c) {
  double end = now_s() + STORED_DEADLINE_S;
  while (stored_events(c, "hang") == 0 || stored_events(c, "cpu") == 0) {
    CHECKF(now_s() < end, "no hang and cpu events stored after %d s", STORED_DEADLINE_S);
    usleep(200000);
  }
}

/* What the browser test needs is there: a missing piece is a failure with
   the way to fix it, never a skip. */
static void check_browser_tools(void) {
  CHECKF(access(PERF_NODE_PATH, X_OK) == 0,
         "node not found (%s): install Debian's nodejs and npm (scripts/deps.sh)", PERF_NODE_PATH);
  CHECKF(access(CHROMIUM_PATH, X_OK) == 0,
         "%s not found: install Debian's chromium (scripts/deps.sh)", CHROMIUM_PATH);
  CHECKF(access(PERF_DASHBOARD_DIR "/node_modules/playwright-core/package.json", R_OK) == 0,
         "playwright-core missing: run `npm ci` in %s (scripts/test.sh does)", PERF_DASHBOARD_DIR);
}

static void case_browser(void) {
  check_browser_tools();
  atexit(kill_child);
  collector_t c;
  collector_start(&c, NULL);
  run_demo(&c, tempdir_make("perf-dash"));
  wait_stored(&c);

  unlink(PERF_DASHBOARD_SCREENSHOT);
  char *argv[] = {PERF_NODE_PATH,
                  PERF_DASHBOARD_DIR "/dashboard_test.mjs",
                  c.url,
                  GOOD_KEY,
                  PERF_DASHBOARD_SCREENSHOT,
                  NULL};
  g_child = spawn(argv, NULL);
  int status = wait_child(BROWSER_DEADLINE_S);
  CHECKF(status == 0, "dashboard_test.mjs exited with %d", status);
  struct stat st;
  CHECKF(stat(PERF_DASHBOARD_SCREENSHOT, &st) == 0 && st.st_size > 0, "no screenshot at %s",
         PERF_DASHBOARD_SCREENSHOT);
  collector_stop_healthy(&c);
}

static const test_case_t CASES[] = {TEST_CASE(browser)};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, CASES, sizeof CASES / sizeof CASES[0]);
}
