/*
 * demo_rig.c - see demo_rig.h.
 */
#include "demo_rig.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"

#define DEMO_DEADLINE_S 120  /* the demo runs ~5 s; much longer on a loaded machine */
#define STORED_DEADLINE_S 60 /* its batches are sent by its shutdown */

long demo_run_uploading(const collector_t *c, const char *path, const char *dir) {
  char data_dir[256], out[256];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", dir);
  snprintf(out, sizeof out, "%s/demo_app.out", dir);
  static const char *const names[] = {"PERF_SDK_SINK", "PERF_SDK_ENDPOINT", "PERF_SDK_API_KEY",
                                      "PERF_SDK_DATA_DIR"};
  const char *values[] = {"http", c->url, GOOD_KEY, data_dir};
  for (size_t i = 0; i < 4; i++)
    CHECK(setenv(names[i], values[i], 1) == 0);
  char *argv[] = {(char *)path, NULL};
  int status = spawn_wait(spawn(argv, out), DEMO_DEADLINE_S);
  for (size_t i = 0; i < 4; i++)
    unsetenv(names[i]);

  FILE *f = fopen(out, "r");
  CHECK(f != NULL);
  char line[512];
  long hang_ms = -1;
  while (fgets(line, sizeof line, f)) {
    fputs(line, stderr);
    sscanf(line, "load_user_profile: %ld ms", &hang_ms);
  }
  fclose(f);
  CHECKF(status == 0, "%s exited with %d", path, status);
  CHECKF(hang_ms >= 900, "%s printed no ~1 s hang (%ld)", path, hang_ms);
  return hang_ms;
}

size_t demo_events_stored(const collector_t *c, const char *kind) {
  char path[128];
  snprintf(path, sizeof path, "/api/v1/events?kind=%s&app=demo_app", kind);
  long status;
  json_t *j = get_json(c, path, &status);
  CHECK_EQ_INT(status, 200);
  size_t n = json_array_size(json_object_get(j, "events"));
  json_decref(j);
  return n;
}

void demo_wait_stored(const collector_t *c) {
  double end = now_s() + STORED_DEADLINE_S;
  while (demo_events_stored(c, "hang") == 0 || demo_events_stored(c, "cpu") == 0) {
    CHECKF(now_s() < end, "no hang and cpu events stored after %d s", STORED_DEADLINE_S);
    usleep(100000);
  }
}
