/*
 * test_demo_e2e.c - the main job end to end, as scripts/demo.sh runs it:
 * the real samples/demo_app uploads to the real perf-collector (a child
 * process on 127.0.0.1 with a temp SQLite db) and the collector's
 * aggregation names the demo's slow code. The hang's top stack is
 * checksum_profile_slowly <- parse_profile_blob <- load_user_profile with
 * the duration the demo measured itself; the CPU burst's top stack is the
 * image worker's convolve_kernel <- apply_filter <- resize_images.
 * `test_demo_e2e <case>`.
 */
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "collector_rig.h"
#include "tempdir.h"

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Run demo_app with the http sink pointed at c; its stdout and stderr go to
   out_path. Returns the hang duration the demo printed (ms). */
static long run_demo(const collector_t *c, const char *dir, const char *out_path) {
  char data_dir[256];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", dir);
  CHECK(setenv("PERF_SDK_SINK", "http", 1) == 0);
  CHECK(setenv("PERF_SDK_ENDPOINT", c->url, 1) == 0);
  CHECK(setenv("PERF_SDK_API_KEY", GOOD_KEY, 1) == 0);
  CHECK(setenv("PERF_SDK_DATA_DIR", data_dir, 1) == 0);
  char *argv[] = {PERF_DEMO_APP_PATH, NULL};
  pid_t pid = spawn(argv, out_path);
  double end = now_s() + 120;
  int st = 0;
  pid_t w;
  while ((w = waitpid(pid, &st, WNOHANG)) == 0 && now_s() < end)
    usleep(50000);
  if (w == 0) kill(pid, SIGKILL), waitpid(pid, &st, 0);
  CHECKF(w == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "demo_app status 0x%x (see %s)", st,
         out_path);

  FILE *f = fopen(out_path, "r");
  CHECK(f != NULL);
  char line[512];
  long hang_ms = -1;
  while (fgets(line, sizeof line, f)) {
    fputs(line, stderr);
    sscanf(line, "load_user_profile: %ld ms", &hang_ms);
  }
  fclose(f);
  CHECKF(hang_ms >= 900, "demo_app printed no ~1 s hang (%ld)", hang_ms);
  return hang_ms;
}

static size_t events_stored(const collector_t *c, const char *kind) {
  char path[128];
  snprintf(path, sizeof path, "/api/v1/events?kind=%s&app=demo_app", kind);
  long status;
  json_t *j = get_json(c, path, &status);
  CHECK_EQ_INT(status, 200);
  size_t n = json_array_size(json_object_get(j, "events"));
  json_decref(j);
  return n;
}

static const char *frame(json_t *stack, size_t i) {
  return json_string_value(json_array_get(json_object_get(stack, "frames"), i));
}

/* The frames of stack, innermost first, start with names. */
static void check_frames(json_t *stack, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *f = frame(stack, i);
    CHECKF(f && strcmp(f, names[i]) == 0, "frame %zu is %s, not %s", i, f ? f : "(none)", names[i]);
  }
}

static json_t *top_stack(const collector_t *c, const char *kind, json_t **doc) {
  char path[128];
  snprintf(path, sizeof path, "/api/v1/top-stacks?kind=%s&app=demo_app&version=1.0.0", kind);
  long status;
  *doc = get_json(c, path, &status);
  CHECK_EQ_INT(status, 200);
  char *text = json_dumps(*doc, JSON_INDENT(1));
  fprintf(stderr, "%s: %.4000s\n", path, text ? text : "?");
  free(text);
  json_t *top = json_array_get(json_object_get(*doc, "stacks"), 0);
  CHECKF(top != NULL, "no %s stack", kind);
  return top;
}

static void case_top_hang(void) {
  collector_t c;
  collector_start(&c, NULL);
  const char *dir = tempdir_make("perf-demo-e2e");
  char out[256];
  snprintf(out, sizeof out, "%s/demo_app.out", dir);
  long hang_ms = run_demo(&c, dir, out);

  /* demo_app's shutdown sent its batches; they are stored once acknowledged,
     so the events are there now - allow a little for the last response. */
  double end = now_s() + 30;
  while ((events_stored(&c, "hang") < 1 || events_stored(&c, "cpu") < 1) && now_s() < end)
    usleep(100000);
  CHECK_EQ_INT(events_stored(&c, "hang"), 1);
  CHECK_EQ_INT(events_stored(&c, "cpu"), 1);

  json_t *doc;
  json_t *hang = top_stack(&c, "hang", &doc);
  static const char *const hang_frames[] = {"checksum_profile_slowly", "parse_profile_blob",
                                            "load_user_profile"};
  check_frames(hang, hang_frames, ARRAY_LEN(hang_frames));
  CHECK_EQ_INT(json_integer_value(json_object_get(hang, "events")), 1);
  CHECK(json_integer_value(json_object_get(hang, "samples")) >= 3);
  /* The loop was busy for the request and the little around it (reading
     the timer, printing the figure): at least what the demo measured
     inside, and not much more. */
  double total = json_real_value(json_object_get(hang, "total_ms"));
  CHECKF(total >= (double)hang_ms && total <= (double)hang_ms + 200,
         "hang total_ms %.1f, the demo measured %ld ms", total, hang_ms);
  CHECK(json_real_value(json_object_get(hang, "mean_ms")) == total);
  json_t *versions = json_object_get(hang, "versions");
  CHECK(json_array_size(versions) == 1 &&
        strcmp(json_string_value(json_array_get(versions, 0)), "1.0.0") == 0);
  json_decref(doc);

  json_t *cpu = top_stack(&c, "cpu", &doc);
  /* The burst's samples mostly end in the kernel loop; the top stack is
     the one with most samples: convolve_kernel, or (rarely) a sample taken
     in apply_filter between two calls. */
  size_t skip = strcmp(frame(cpu, 0), "convolve_kernel") == 0 ? 1 : 0;
  static const char *const cpu_frames[] = {"apply_filter", "resize_images", "image_worker"};
  for (size_t i = 0; i < ARRAY_LEN(cpu_frames); i++) {
    const char *f = frame(cpu, skip + i);
    CHECKF(f && strcmp(f, cpu_frames[i]) == 0, "cpu frame %zu is %s, not %s", skip + i,
           f ? f : "(none)", cpu_frames[i]);
  }
  CHECK_EQ_INT(json_integer_value(json_object_get(cpu, "events")), 1);
  json_decref(doc);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {TEST_CASE(top_hang)};
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
