/*
 * test_collector_cpu_weights.c - CPU events' weights (Event.
 * sample_weights_micros) in the real perf-collector, fed hand-made batches
 * (batch_post.c):
 *  - weighted: a CPU event whose one sample of cpu_rare weighs 9 ms and
 *    whose three samples of cpu_often weigh 1 ms each (and a failed sample):
 *    top-stacks, the folded export and the event's detail rank cpu_rare
 *    first with exactly 9000 us against 3000;
 *  - unweighted: the same event from an SDK without weights counts 1 per
 *    sample (cpu_often 3, cpu_rare 1), and the two add up in one query;
 *  - bad_weights: weights not one per sample -> 400, nothing stored.
 */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "perf/v1/perf.pb-c.h"

/* One CPU event of app: stack 1 (cpu_often <- cpu_main) sampled three
   times, stack 2 (cpu_rare <- cpu_main) once, one failed sample; weights
   (us, one per sample, n_weights of them) or none. */
static long send_cpu_event(const collector_t *c, const char *app, const uint64_t *weights,
                           size_t n_weights, unsigned seed, reply_t *r) {
  char *strings[] = {"", "cpu_often", "cpu_rare", "cpu_main"};
  uint32_t often[] = {1, 3}, rare[] = {2, 3};
  Perf__V1__Stack st[2] = {PERF__V1__STACK__INIT, PERF__V1__STACK__INIT};
  st[0].n_frames = 2, st[0].frames = often;
  st[1].n_frames = 2, st[1].frames = rare;
  Perf__V1__Stack *sts[] = {&st[0], &st[1]};
  Perf__V1__StackCount sc[2] = {PERF__V1__STACK_COUNT__INIT, PERF__V1__STACK_COUNT__INIT};
  sc[0].stack = 1, sc[0].samples = 3, sc[0].tid = 7;
  sc[1].stack = 2, sc[1].samples = 1, sc[1].tid = 7;
  Perf__V1__StackCount *scs[] = {&sc[0], &sc[1]};
  int64_t offsets[] = {0, 10000, 10000, 10000, 10000};
  uint32_t stacks[] = {1, 2, 0, 1, 1};
  int32_t errors[] = {-4};
  Perf__V1__Event ev = PERF__V1__EVENT__INIT;
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
  ev.start_unix_nanos = 1700000000000000000LL + (int64_t)seed * 1000000000;
  ev.duration_nanos = 50000000;
  ev.tid = 7;
  ev.cpu_percent = 90;
  ev.n_stack_counts = 2, ev.stack_counts = scs, ev.dominant_stack = 1;
  ev.n_sample_offsets_micros = 5, ev.sample_offsets_micros = offsets;
  ev.n_sample_stacks = 5, ev.sample_stacks = stacks;
  ev.n_sample_errors = 1, ev.sample_errors = errors;
  ev.n_sample_weights_micros = n_weights, ev.sample_weights_micros = (uint64_t *)weights;
  Perf__V1__Event *evs[] = {&ev};
  Perf__V1__Resource res = PERF__V1__RESOURCE__INIT;
  res.app_name = (char *)app;
  res.app_version = "1.0";
  res.environment = "prod";
  Perf__V1__Batch b = PERF__V1__BATCH__INIT;
  b.resource = &res;
  batch_frames_t frames;
  batch_set_frames(&b, &frames, strings, ARRAY_LEN(strings));
  b.n_stacks = 2, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  return batch_post_answer(c, &b, seed, r);
}

/* 1 ms on each sample of cpu_often, 9 ms on cpu_rare's, 0 on the failed one. */
static const uint64_t WEIGHTS[] = {1000, 9000, 0, 1000, 1000};

static json_t *get_ok(const collector_t *c, const char *path) {
  long status = 0;
  json_t *o = get_json(c, path, &status);
  CHECKF(status == 200 && o, "GET %s -> %ld", path, status);
  return o;
}

/* top-stacks?query as "leaf:samples,..." in the API's order. */
static void check_top(const collector_t *c, const char *query, const char *want) {
  char path[256], got[256] = "";
  snprintf(path, sizeof path, "/api/v1/top-stacks?%s", query);
  json_t *o = get_ok(c, path);
  size_t i, len = 0;
  json_t *s;
  json_array_foreach(json_object_get(o, "stacks"), i, s) {
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s:%lld", i ? "," : "",
                            json_string_value(json_array_get(json_object_get(s, "frames"), 0)),
                            (long long)json_integer_value(json_object_get(s, "samples")));
    CHECK(len < sizeof got);
  }
  json_decref(o);
  CHECKF(strcmp(got, want) == 0, "top-stacks?%s: %s, want %s", query, got, want);
}

/* The folded export of query, exactly (its lines sorted by stack). */
static void check_folded(const collector_t *c, const char *query, const char *want) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/export/folded?%s", query);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  const char *auth[] = {"Authorization: Bearer " GOOD_KEY, NULL};
  long status = request(c, "GET", path, auth, NULL, 0, false, r);
  CHECKF(status == 200 && strcmp(r->body, want) == 0, "%s -> %ld:\n%.400s\nwant:\n%s", path, status,
         r->body, want);
  free(r);
}

/* The one event of app's detail: its stacks as "leaf:samples:cpu_us,..."
   (cpu_us -1 when absent). */
static void check_detail(const collector_t *c, const char *app, const char *want) {
  char path[256], got[256] = "";
  snprintf(path, sizeof path, "/api/v1/events?kind=cpu&app=%s", app);
  json_t *list = get_ok(c, path);
  json_t *events = json_object_get(list, "events");
  CHECK_EQ_INT(json_array_size(events), 1);
  snprintf(path, sizeof path, "/api/v1/events/%lld",
           (long long)json_integer_value(json_object_get(json_array_get(events, 0), "id")));
  json_decref(list);
  json_t *o = get_ok(c, path);
  size_t i, len = 0;
  json_t *s;
  json_array_foreach(json_object_get(o, "stacks"), i, s) {
    json_t *cpu = json_object_get(s, "cpu_us");
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s:%lld:%lld", i ? "," : "",
                            json_string_value(json_array_get(json_object_get(s, "names"), 0)),
                            (long long)json_integer_value(json_object_get(s, "samples")),
                            cpu ? (long long)json_integer_value(cpu) : -1LL);
    CHECK(len < sizeof got);
  }
  json_decref(o);
  CHECKF(strcmp(got, want) == 0, "%s: %s, want %s", path, got, want);
}

static void case_weighted(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(send_cpu_event(&c, "weighted", WEIGHTS, ARRAY_LEN(WEIGHTS), 1, r), 200);
  check_top(&c, "kind=cpu&app=weighted", "cpu_rare:9000,cpu_often:3000");
  check_folded(&c, "kind=cpu&app=weighted", "cpu_main;cpu_often 3000\ncpu_main;cpu_rare 9000\n");
  check_detail(&c, "weighted", "cpu_rare:1:9000,cpu_often:3:3000");
  free(r);
  collector_stop_healthy(&c);
}

static void case_unweighted(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(send_cpu_event(&c, "old", NULL, 0, 1, r), 200);
  check_top(&c, "kind=cpu&app=old", "cpu_often:3,cpu_rare:1");
  check_detail(&c, "old", "cpu_often:3:-1,cpu_rare:1:-1");
  /* Beside a weighted event: each stack's weights and samples add up. */
  CHECK_EQ_INT(send_cpu_event(&c, "weighted", WEIGHTS, ARRAY_LEN(WEIGHTS), 2, r), 200);
  check_top(&c, "kind=cpu", "cpu_rare:9001,cpu_often:3003");
  free(r);
  collector_stop_healthy(&c);
}

static void case_bad_weights(void) {
  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(send_cpu_event(&c, "bad", WEIGHTS, 2, 1, r), 400);
  check_top(&c, "kind=cpu", "");
  free(r);
  collector_stop_healthy(&c);
}

static const test_case_t g_cases[] = {
    TEST_CASE(weighted),
    TEST_CASE(unweighted),
    TEST_CASE(bad_weights),
};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, g_cases, ARRAY_LEN(g_cases));
}
