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
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "collector_rig.h"
#include "demo_rig.h"
#include "tempdir.h"

#define CHROMIUM_PATH "/usr/bin/chromium"
#define BROWSER_DEADLINE_S 240 /* node + chromium start, then ~3 s of steps */

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
  collector_t c;
  collector_start(&c, NULL);
  demo_run_uploading(&c, PERF_DEMO_APP_PATH, tempdir_make("perf-dash"));
  demo_wait_stored(&c);

  unlink(PERF_DASHBOARD_SCREENSHOT);
  char *argv[] = {PERF_NODE_PATH,
                  PERF_DASHBOARD_DIR "/dashboard_test.mjs",
                  c.url,
                  READ_KEY, /* the dashboard needs only the read scope */
                  PERF_DASHBOARD_SCREENSHOT,
                  NULL};
  int status = spawn_wait(spawn(argv, NULL), BROWSER_DEADLINE_S);
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
