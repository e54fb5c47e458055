/*
 * test_demo_e2e.c - the main job end to end, as scripts/demo.sh runs it:
 * the real samples/demo_app uploads to the real perf-collector (a child
 * process on 127.0.0.1 with a temp SQLite db) and the collector's
 * aggregation names the demo's slow code. The hang's top stack is
 * checksum_profile_slowly <- parse_profile_blob <- load_user_profile with
 * the duration the demo measured itself; the CPU burst's top stack is the
 * image worker's convolve_kernel <- apply_filter <- resize_images. The
 * demo's tags (region=local, build=debug) arrive with every event, the
 * tag filter keeps them all and drops them for another value, and the
 * drops query counts the demo's batches with and without the tags; its
 * loop stats rate its one hang per hour of watched time.
 * `test_demo_e2e <case>`.
 */
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "collector_rig.h"
#include "demo_rig.h"
#include "tempdir.h"
#include "test_util.h"

static const char *frame(json_t *stack, size_t i) {
  return json_string_value(json_array_get(json_object_get(stack, "frames"), i));
}

/* Frame label f names function `name`: itself, or inlined ("<name>
   [inline]": whether the compiler inlined it depends on the build type;
   -O2 inlines the demo's image_worker into its thread's entry). */
static bool names_function(const char *f, const char *name) {
  size_t n = strlen(name);
  return f && strncmp(f, name, n) == 0 && (f[n] == '\0' || strcmp(f + n, " [inline]") == 0);
}

/* The frames of stack, innermost first, start with names. */
static void check_frames(json_t *stack, const char *const *names, size_t n) {
  for (size_t i = 0; i < n; i++) {
    const char *f = frame(stack, i);
    CHECKF(names_function(f, names[i]), "frame %zu is %s, not %s", i, f ? f : "(none)", names[i]);
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

/* The SDK's tags, sent by its own encoder, on every event of the demo and
   in the tag filter of the events and drops queries. */
static void check_tags(const collector_t *c) {
  json_t *all = get_ok(c, "/api/v1/events?app=demo_app&limit=1000");
  json_t *tagged =
      get_ok(c, "/api/v1/events?app=demo_app&limit=1000&tag=region:local&tag=build:debug");
  json_t *other = get_ok(c, "/api/v1/events?app=demo_app&tag=region:remote");
  json_t *events = json_object_get(all, "events"), *e;
  CHECK(json_array_size(events) >= 2);
  CHECK_EQ_INT(json_array_size(json_object_get(tagged, "events")), json_array_size(events));
  CHECK_EQ_INT(json_array_size(json_object_get(other, "events")), 0);
  size_t i;
  json_array_foreach(events, i, e) {
    json_t *tags = json_object_get(e, "tags");
    char *text = json_dumps(tags, JSON_COMPACT);
    CHECKF(text && strcmp(text, "[{\"key\":\"build\",\"value\":\"debug\"},"
                                "{\"key\":\"region\",\"value\":\"local\"}]") == 0,
           "event tags %s", text ? text : "?");
    free(text);
  }
  json_decref(all);
  json_decref(tagged);
  json_decref(other);
  json_t *drops = get_ok(c, "/api/v1/drops?app=demo_app");
  json_t *drops_tagged = get_ok(c, "/api/v1/drops?app=demo_app&tag=build:debug");
  json_t *drops_other = get_ok(c, "/api/v1/drops?app=demo_app&tag=build:release");
  CHECK(json_integer_value(json_object_get(drops, "batches")) >= 1);
  CHECK(json_equal(drops, drops_tagged));
  CHECK_EQ_INT(json_integer_value(json_object_get(drops_other, "batches")), 0);
  json_decref(drops);
  json_decref(drops_tagged);
  json_decref(drops_other);
}

/* The demo's loop stats reached the collector with its batches: version
   1.0.0 was watched for a while (less than the run took), with its one
   hang; its units of work by duration hold exactly one of 250 ms or more
   (the hang, 500 ms-2 s: the demo measured hang_ms of it inside); a
   version never run has no rate. */
static void check_rates(const collector_t *c, long hang_ms, double run_s) {
  json_t *doc = get_ok(c, "/api/v1/versions/compare?app=demo_app&a=1.0.0&b=0.0.0");
  json_t *v = json_array_get(json_object_get(doc, "versions"), 0);
  double hours = json_number_value(json_object_get(v, "watched_hours"));
  CHECKF(hours > 0 && hours * 3600 <= run_s, "watched %.6f h in a run of %.1f s", hours, run_s);
  CHECK_EQ_INT(json_integer_value(json_object_get(v, "hangs")), 1);
  CHECK(json_integer_value(json_object_get(v, "stats_batches")) >= 1);
  double rate = json_number_value(json_object_get(v, "hangs_per_hour"));
  CHECKF(rate > 1 / hours - 1e-6 && rate < 1 / hours + 1e-6, "%f hangs per hour", rate);
  json_t *h = json_object_get(v, "histogram");
  long long long_units = 0, hang_bucket = 0;
  for (size_t i = 3; i < json_array_size(h); i++)
    long_units += json_integer_value(json_object_get(json_array_get(h, i), "units"));
  for (size_t i = 4; i <= 5; i++)
    hang_bucket += json_integer_value(json_object_get(json_array_get(h, i), "units"));
  CHECKF(long_units == 1 && hang_bucket == 1, "%lld units >= 250 ms, %lld of 500 ms-2 s (%ld ms)",
         long_units, hang_bucket, hang_ms);
  CHECK(json_is_null(
      json_object_get(json_array_get(json_object_get(doc, "versions"), 1), "hangs_per_hour")));
  json_decref(doc);
}

static void case_top_hang(void) {
  collector_t c;
  collector_start(&c, NULL);
  double run_start = now_s();
  long hang_ms = demo_run_uploading(&c, PERF_DEMO_APP_PATH, tempdir_make("perf-demo-e2e"));
  double run_s = now_s() - run_start;
  /* demo_app's shutdown sent its batches: they are stored when
     acknowledged; allow for the last response still on its way. */
  demo_wait_stored(&c);
  CHECK_EQ_INT(demo_events_stored(&c, "hang"), 1);
  CHECK_EQ_INT(demo_events_stored(&c, "cpu"), 1);
  /* The demo names the request that hangs (perf_sdk_loop_busy_label). */
  json_t *labelled = get_ok(&c, "/api/v1/events?kind=hang&label=GET%20%2Fprofile");
  json_t *events = json_object_get(labelled, "events");
  CHECK_EQ_INT(json_array_size(events), 1);
  const char *label = json_string_value(json_object_get(json_array_get(events, 0), "label"));
  CHECK(label && strcmp(label, "GET /profile") == 0);
  json_decref(labelled);

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
  double total = json_real_value(json_object_get(hang, "hang_ms"));
  CHECKF(total >= (double)hang_ms && total <= (double)hang_ms + 200,
         "hang_ms %.1f, the demo measured %ld ms", total, hang_ms);
  CHECK(json_real_value(json_object_get(hang, "event_total_ms")) == total);
  CHECK(json_real_value(json_object_get(hang, "event_mean_ms")) == total);
  json_t *versions = json_object_get(hang, "versions");
  CHECK(json_array_size(versions) == 1 &&
        strcmp(json_string_value(json_array_get(versions, 0)), "1.0.0") == 0);
  json_decref(doc);

  json_t *cpu = top_stack(&c, "cpu", &doc);
  /* The burst's samples mostly end in the kernel loop; the top stack is
     the one with most CPU time: convolve_kernel, or (rarely) samples taken
     in apply_filter between two calls. */
  CHECK(json_integer_value(json_object_get(cpu, "samples")) >= 1);
  CHECK(json_integer_value(json_object_get(cpu, "cpu_us")) >= 1);
  size_t skip = strcmp(frame(cpu, 0), "convolve_kernel") == 0 ? 1 : 0;
  static const char *const cpu_frames[] = {"apply_filter", "resize_images", "image_worker"};
  for (size_t i = 0; i < ARRAY_LEN(cpu_frames); i++) {
    const char *f = frame(cpu, skip + i);
    CHECKF(names_function(f, cpu_frames[i]), "cpu frame %zu is %s, not %s", skip + i,
           f ? f : "(none)", cpu_frames[i]);
  }
  CHECK_EQ_INT(json_integer_value(json_object_get(cpu, "events")), 1);
  json_decref(doc);
  check_tags(&c);
  check_rates(&c, hang_ms, run_s);
  collector_stop_healthy(&c);
}

/* The demo with two CPU-bound processes beside it on this machine (two
   compilers, as a user's build machine has): it still finds its hang and
   its CPU burst, and the collector stores both. */
static void case_beside_busy_processes(void) {
  pid_t hogs[2] = {cpu_hog_start(), cpu_hog_start()};
  collector_t c;
  collector_start(&c, NULL);
  demo_run_uploading(&c, PERF_DEMO_APP_PATH, tempdir_make("perf-demo-busy"));
  for (int i = 0; i < 2; i++)
    cpu_hog_stop(hogs[i]);
  demo_wait_stored(&c);
  /* The 1 s hang at least: starved by the hogs (and a loaded test run),
     one of the loop's short requests may run past the 250 ms threshold
     too, and is then a hang as truly as the planned one. */
  size_t hangs = demo_events_stored(&c, "hang");
  CHECKF(hangs >= 1 && hangs <= 3, "%zu hangs stored", hangs);
  /* Whatever else ran long, the planned hang is stored, once. */
  json_t *planned = get_ok(&c, "/api/v1/events?kind=hang&app=demo_app&label=GET%20%2Fprofile");
  CHECK_EQ_INT(json_array_size(json_object_get(planned, "events")), 1);
  json_decref(planned);
  CHECK_EQ_INT(demo_events_stored(&c, "cpu"), 1);
  collector_stop_healthy(&c);
}

int main(int argc, char **argv) {
  static const test_case_t cases[] = {TEST_CASE(top_hang), TEST_CASE(beside_busy_processes)};
  return collector_test_main(argc, argv, cases, ARRAY_LEN(cases));
}
