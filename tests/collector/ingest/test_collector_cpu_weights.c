/*
 * test_collector_cpu_weights.c - a stack's own time in the real
 * perf-collector, apart from its samples: CPU time from CPU events' weights
 * (Event.sample_weights_micros), hang time from hangs' durations shared by
 * samples.
 *  - weighted: a hand-made CPU event (batch_post.c) whose one sample of
 *    cpu_rare weighs 9 ms and whose three samples of cpu_often weigh 1 ms
 *    each (and a failed sample): top-stacks, the flame graph, the folded
 *    export (value=cpu_us) and the event's detail rank cpu_rare first with
 *    exactly 9000 us against 3000, and say 1 and 3 samples;
 *  - unweighted: the same event from an SDK without weights has its
 *    samples and no CPU time; beside a weighted one both add up;
 *  - bad_weights: weights not one per sample -> 400, nothing stored;
 *  - bad_value: the folded export's value other than samples or cpu_us,
 *    or cpu_us for hangs -> 400 naming value;
 *  - hang_time: two hand-made hangs of one group (100 ms over 2 + 1
 *    samples, 50 ms over 1): the group's hang_ms and the events' total,
 *    mean and p95; each stack's share of the hangs, to the nanosecond
 *    rounded down (66.666666 + 50 ms, 33.333333 ms), in the flame graph,
 *    the event's detail and the pprof export's wall values;
 *  - sdk_profile: the real SDK in this process profiles
 *    support/cpu_workload.c (file sink), its batch records are sent to the
 *    collector as they are, and every stack count's samples and CPU time
 *    in the event's detail, the per-function sums in top-stacks, the flame
 *    graph and the folded export, are exactly the batch's: its counts and
 *    the sums of its samples' weights, worked out here from the samples.
 */
#include <dirent.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "batch_post.h"
#include "check.h"
#include "collector_rig.h"
#include "cpu_workload.h"
#include "perf/v1/perf.pb-c.h"
#include "perf_sdk.h"
#include "pprof_check.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/spool.h"
#include "sdk_util.h"
#include "tempdir.h"
#include "test_util.h"

#define WAIT_MS 30000 /* the SDK's CPU burst, on a loaded machine */

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
  Perf__V1__Resource res;
  Perf__V1__Batch b;
  batch_begin(&b, &res, app, "1.0", "prod", NULL);
  batch_frames_t frames;
  batch_set_frames(&b, &frames, strings, ARRAY_LEN(strings));
  b.n_stacks = 2, b.stacks = sts;
  b.n_events = 1, b.events = evs;
  return batch_post_answer(c, &b, seed, r);
}

/* 1 ms on each sample of cpu_often, 9 ms on cpu_rare's, 0 on the failed one. */
static const uint64_t WEIGHTS[] = {1000, 9000, 0, 1000, 1000};

static long long int_of(const json_t *o, const char *key) {
  json_t *v = json_object_get(o, key);
  CHECKF(json_is_integer(v), "%s is not an integer", key);
  return (long long)json_integer_value(v);
}

/* top-stacks?query as "leaf:samples:cpu_us,..." in the API's order (the
   CPU view: every row has both). */
static void check_top(const collector_t *c, const char *query, const char *want) {
  char path[256], got[256] = "";
  snprintf(path, sizeof path, "/api/v1/top-stacks?%s", query);
  json_t *o = get_ok(c, path);
  size_t i, len = 0;
  json_t *s;
  json_array_foreach(json_object_get(o, "stacks"), i, s) {
    CHECK(json_object_get(s, "hang_ms") == NULL);
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s:%lld:%lld", i ? "," : "",
                            json_string_value(json_array_get(json_object_get(s, "frames"), 0)),
                            int_of(s, "samples"), int_of(s, "cpu_us"));
    CHECK(len < sizeof got);
  }
  json_decref(o);
  CHECKF(strcmp(got, want) == 0, "top-stacks?%s: %s, want %s", query, got, want);
}

/* The folded export of query, exactly (its lines sorted by stack). */
static void check_folded(const collector_t *c, const char *query, const char *want) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/export/folded?%s", query);
  char *got = get_text(c, path);
  CHECKF(strcmp(got, want) == 0, "%s:\n%.400s\nwant:\n%s", path, got, want);
  free(got);
}

/* The flame graph of query, exactly. */
static void check_flame(const collector_t *c, const char *query, const char *want) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/flame?%s", query);
  char *got = get_text(c, path);
  CHECKF(strcmp(got, want) == 0, "%s:\n%.1000s\nwant:\n%s", path, got, want);
  free(got);
}

/* The id of the only event of kind and app. */
static long long only_event(const collector_t *c, const char *kind, const char *app) {
  char path[256];
  snprintf(path, sizeof path, "/api/v1/events?kind=%s&app=%s", kind, app);
  json_t *list = get_ok(c, path);
  json_t *events = json_object_get(list, "events");
  CHECK_EQ_INT(json_array_size(events), 1);
  long long id = int_of(json_array_get(events, 0), "id");
  json_decref(list);
  return id;
}

/* The one event of app's detail: its stacks as "leaf:samples:cpu_us,..."
   (cpu_us -1 when absent). */
static void check_detail(const collector_t *c, const char *app, const char *want) {
  char path[256], got[256] = "";
  snprintf(path, sizeof path, "/api/v1/events/%lld", only_event(c, "cpu", app));
  json_t *o = get_ok(c, path);
  size_t i, len = 0;
  json_t *s;
  json_array_foreach(json_object_get(o, "stacks"), i, s) {
    json_t *cpu = json_object_get(s, "cpu_us");
    CHECK(json_object_get(s, "hang_ms") == NULL);
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s:%lld:%lld", i ? "," : "",
                            json_string_value(json_array_get(json_object_get(s, "names"), 0)),
                            int_of(s, "samples"), cpu ? (long long)json_integer_value(cpu) : -1LL);
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
  /* Ranked by CPU time: cpu_rare's one sample weighs more than cpu_often's three. */
  check_top(&c, "kind=cpu&app=weighted", "cpu_rare:1:9000,cpu_often:3:3000");
  check_folded(&c, "kind=cpu&app=weighted", "cpu_main;cpu_often 3\ncpu_main;cpu_rare 1\n");
  check_folded(&c, "kind=cpu&app=weighted&value=samples",
               "cpu_main;cpu_often 3\ncpu_main;cpu_rare 1\n");
  check_folded(&c, "kind=cpu&app=weighted&value=cpu_us",
               "cpu_main;cpu_often 3000\ncpu_main;cpu_rare 9000\n");
  check_flame(&c, "kind=cpu&app=weighted",
              "{\"name\":\"all\",\"samples\":4,\"cpu_us\":12000,\"truncated\":false,"
              "\"stacks_omitted\":0,\"children\":[{\"name\":\"cpu_main\","
              "\"in_app\":false,\"samples\":4,\"cpu_us\":12000,"
              "\"children\":[{\"name\":\"cpu_rare\",\"in_app\":false,\"samples\":1,"
              "\"cpu_us\":9000,\"children\":[]},{\"name\":\"cpu_often\","
              "\"in_app\":false,\"samples\":3,\"cpu_us\":3000,\"children\":[]}]}]}");
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
  check_top(&c, "kind=cpu&app=old", "cpu_often:3:0,cpu_rare:1:0");
  check_folded(&c, "kind=cpu&app=old&value=cpu_us", "cpu_main;cpu_often 0\ncpu_main;cpu_rare 0\n");
  check_detail(&c, "old", "cpu_often:3:-1,cpu_rare:1:-1");
  /* Beside a weighted event: each stack's samples and CPU time add up. */
  CHECK_EQ_INT(send_cpu_event(&c, "weighted", WEIGHTS, ARRAY_LEN(WEIGHTS), 2, r), 200);
  check_top(&c, "kind=cpu", "cpu_rare:2:9000,cpu_often:6:3000");
  check_folded(&c, "kind=cpu", "cpu_main;cpu_often 6\ncpu_main;cpu_rare 2\n");
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

static void case_bad_value(void) {
  collector_t c;
  collector_start(&c, NULL);
  check_bad_parameter(&c, "/api/v1/export/folded", "kind=cpu&value=cpu_ms", "value");
  check_bad_parameter(&c, "/api/v1/export/folded", "kind=cpu&value=weight", "value");
  check_bad_parameter(&c, "/api/v1/export/folded", "kind=hang&value=cpu_us", "value");
  /* The kind is named first when both are wrong. */
  check_bad_parameter(&c, "/api/v1/export/folded", "kind=wall&value=cpu_us", "kind");
  check_folded(&c, "kind=cpu&value=cpu_us", "");
  check_folded(&c, "kind=hang&value=samples", "");
  collector_stop_healthy(&c);
}

/* ---- hang time ------------------------------------------------------------ */

/* A hang of duration_ms in hang_main -> hang_loop, sampled `a` times in
   hang_leaf_a and `b` times in hang_leaf_b. */
static void send_hang(const collector_t *c, int64_t duration_ms, uint32_t a, uint32_t b,
                      unsigned seed) {
  char *strings[] = {"", "hang_leaf_a", "hang_leaf_b", "hang_loop", "hang_main"};
  uint32_t fa[] = {1, 3, 4}, fb[] = {2, 3, 4};
  Perf__V1__Stack st[2] = {PERF__V1__STACK__INIT, PERF__V1__STACK__INIT};
  st[0].n_frames = 3, st[0].frames = fa;
  st[1].n_frames = 3, st[1].frames = fb;
  st[0].end = st[1].end = PERF__V1__STACK_END__STACK_END_COMPLETE;
  Perf__V1__Stack *sts[] = {&st[0], &st[1]};
  Perf__V1__StackCount sc[2] = {PERF__V1__STACK_COUNT__INIT, PERF__V1__STACK_COUNT__INIT};
  sc[0].stack = 1, sc[0].samples = a, sc[0].tid = 9;
  sc[1].stack = 2, sc[1].samples = b, sc[1].tid = 9;
  Perf__V1__StackCount *scs[] = {&sc[0], &sc[1]};
  Perf__V1__Event ev = PERF__V1__EVENT__INIT;
  ev.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  ev.start_unix_nanos = 1700000000000000000LL + (int64_t)seed * 1000000000;
  ev.duration_nanos = duration_ms * 1000000;
  ev.tid = 9;
  ev.cpu_percent = -1;
  ev.n_stack_counts = b ? 2 : 1, ev.stack_counts = scs, ev.dominant_stack = 1;
  Perf__V1__Event *evs[] = {&ev};
  Perf__V1__Resource res;
  Perf__V1__Batch batch;
  batch_begin(&batch, &res, "hangs", NULL, NULL, NULL);
  batch_frames_t frames;
  batch_set_frames(&batch, &frames, strings, ARRAY_LEN(strings));
  batch.n_stacks = 2, batch.stacks = sts;
  batch.n_events = 1, batch.events = evs;
  batch_post(c, &batch, seed);
}

/* The pprof export of kind=hang: each Sample's innermost function with its
   samples and wall nanoseconds, "name:samples:wall,..." in the export's
   order. */
static void check_pprof_wall(const collector_t *c, const char *want) {
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  CHECK_EQ_INT(get_key(c, GOOD_KEY, "/api/v1/export/pprof?kind=hang&app=hangs", r), 200);
  pprof_profile_t *p = pprof_decode_checked(r->body, r->body_len);
  CHECK_EQ_INT(p->n_sample_type, 2);
  CHECK(!strcmp(pprof_string(p, p->sample_type[1]->type), "wall") &&
        !strcmp(pprof_string(p, p->sample_type[1]->unit), "nanoseconds"));
  char got[256] = "";
  size_t len = 0;
  for (size_t i = 0; i < p->n_sample; i++) {
    const Perftools__Profiles__Sample *s = p->sample[i];
    const char *name = "?";
    for (size_t k = 0; k < p->n_location; k++)
      if (p->location[k]->id == s->location_id[0])
        for (size_t f = 0; f < p->n_function; f++)
          if (p->function[f]->id == p->location[k]->line[0]->function_id)
            name = pprof_string(p, p->function[f]->name);
    len += (size_t)snprintf(got + len, sizeof got - len, "%s%s:%lld:%lld", i ? "," : "", name,
                            (long long)s->value[0], (long long)s->value[1]);
    CHECK(len < sizeof got);
  }
  perftools__profiles__profile__free_unpacked(p, NULL);
  free(r);
  CHECKF(strcmp(got, want) == 0, "pprof: %s, want %s", got, want);
}

static void case_hang_time(void) {
  collector_t c;
  collector_start(&c, NULL);
  send_hang(&c, 100, 2, 1, 1);
  send_hang(&c, 50, 1, 0, 2);
  json_t *top = get_ok(&c, "/api/v1/top-stacks?kind=hang&app=hangs");
  json_t *stacks = json_object_get(top, "stacks");
  CHECK_EQ_INT(json_array_size(stacks), 1);
  json_t *g = json_array_get(stacks, 0);
  CHECK_EQ_INT(int_of(g, "events"), 2);
  CHECK_EQ_INT(int_of(g, "samples"), 4);
  CHECK(json_object_get(g, "cpu_us") == NULL);
  /* Every sample of a hang is in its group: the group's time is all of both hangs'. */
  CHECK(json_real_value(json_object_get(g, "hang_ms")) == 150.0);
  CHECK(json_real_value(json_object_get(g, "event_total_ms")) == 150.0);
  CHECK(json_real_value(json_object_get(g, "event_mean_ms")) == 75.0);
  CHECK(json_real_value(json_object_get(g, "event_p95_ms")) == 100.0);
  json_decref(top);
  /* Each stack's share of each hang by samples, rounded down to the
     nanosecond: hang_leaf_a 2/3 of 100 ms + all of 50, hang_leaf_b 1/3. */
  check_flame(&c, "kind=hang&app=hangs",
              "{\"name\":\"all\",\"samples\":4,\"hang_ms\":149.999999,"
              "\"truncated\":false,\"stacks_omitted\":0,"
              "\"children\":[{\"name\":\"hang_main\",\"in_app\":false,\"samples\":4,"
              "\"hang_ms\":149.999999,\"children\":[{\"name\":\"hang_loop\","
              "\"in_app\":false,\"samples\":4,\"hang_ms\":149.999999,"
              "\"children\":[{\"name\":\"hang_leaf_a\",\"in_app\":false,"
              "\"samples\":3,\"hang_ms\":116.666666,\"children\":[]},"
              "{\"name\":\"hang_leaf_b\",\"in_app\":false,\"samples\":1,"
              "\"hang_ms\":33.333333,\"children\":[]}]}]}]}");
  check_folded(&c, "kind=hang&app=hangs",
               "hang_main;hang_loop;hang_leaf_a 3\nhang_main;hang_loop;hang_leaf_b 1\n");
  check_pprof_wall(&c, "hang_leaf_a:3:116666666,hang_leaf_b:1:33333333");
  /* The 100 ms hang's detail: its two stacks' shares. */
  json_t *list = get_ok(&c, "/api/v1/events?kind=hang&app=hangs");
  long long id = -1;
  size_t i;
  json_t *e;
  json_array_foreach(json_object_get(list, "events"), i, e) {
    if (json_real_value(json_object_get(e, "duration_ms")) == 100.0) id = int_of(e, "id");
  }
  json_decref(list);
  CHECK(id > 0);
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld", id);
  json_t *detail = get_ok(&c, path);
  json_t *ds = json_object_get(detail, "stacks");
  CHECK_EQ_INT(json_array_size(ds), 2);
  static const char *const leaf[] = {"hang_leaf_a", "hang_leaf_b"};
  static const double hang_ms[] = {66666666 / 1e6, 33333333 / 1e6};
  for (size_t k = 0; k < 2; k++) {
    json_t *s = json_array_get(ds, k);
    CHECK(!strcmp(json_string_value(json_array_get(json_object_get(s, "names"), 0)), leaf[k]));
    CHECK_EQ_INT(int_of(s, "samples"), 2 - (long long)k);
    CHECK(json_object_get(s, "cpu_us") == NULL);
    CHECKF(json_real_value(json_object_get(s, "hang_ms")) == hang_ms[k], "%s: hang_ms %.9f",
           leaf[k], json_real_value(json_object_get(s, "hang_ms")));
  }
  json_decref(detail);
  collector_stop_healthy(&c);
}

/* ---- the real SDK's CPU profile --------------------------------------------- */

/* The functions of the known split whose sums are compared. */
static const char *const PHASES[] = {"phase_seventy", "phase_thirty", "idle_work", "idle_wait"};
#define N_PHASES ARRAY_LEN(PHASES)

static const char *string_of(const Perf__V1__Batch *b, uint32_t i) {
  return i < b->n_strings ? b->strings[i] : "";
}

/* Which of PHASES the batch's stack (1-based) runs, innermost first, by
   its frames' functions and inline lines; N_PHASES for none. */
static size_t batch_phase(const Perf__V1__Batch *b, uint32_t stack) {
  const Perf__V1__Stack *s = b->stacks[stack - 1];
  for (size_t i = 0; i < s->n_frames; i++) {
    const Perf__V1__Frame *f = b->frames[s->frames[i] - 1];
    for (size_t l = 0; l <= f->n_lines; l++) {
      uint32_t fn = l < f->n_lines ? f->lines[l]->function : f->function;
      if (!fn) continue;
      const char *name = string_of(b, b->functions[fn - 1]->name);
      for (size_t p = 0; p < N_PHASES; p++)
        if (!strcmp(name, PHASES[p])) return p;
    }
  }
  return N_PHASES;
}

/* The same for the collector's names (labels) of a stack, innermost first. */
static size_t names_phase(const json_t *names) {
  size_t i;
  json_t *n;
  json_array_foreach(names, i, n) {
    for (size_t p = 0; p < N_PHASES; p++)
      if (!strcmp(json_string_value(n), PHASES[p])) return p;
  }
  return N_PHASES;
}

/* One stack count: its thread, phase, samples and CPU time. */
typedef struct count_s {
  long long tid, phase, samples, cpu_us;
} count_t;

static int cmp_count(const void *x, const void *y) {
  const long long *a = x, *b = y;
  for (int i = 0; i < 4; i++)
    if (a[i] != b[i]) return a[i] < b[i] ? -1 : 1;
  return 0;
}

/* Sort the counts and add up those of one thread and phase into one
   (the collector keeps one row per stack signature and thread: the SDK's
   stacks that differ only in addresses inside the same functions are
   one). Returns how many remain. */
static size_t merge_counts(count_t *c, size_t n) {
  qsort(c, n, sizeof *c, cmp_count);
  size_t out = 0;
  for (size_t i = 0; i < n; i++) {
    if (out > 0 && c[out - 1].tid == c[i].tid && c[out - 1].phase == c[i].phase) {
      c[out - 1].samples += c[i].samples;
      c[out - 1].cpu_us += c[i].cpu_us;
    } else {
      c[out++] = c[i];
    }
  }
  qsort(c, out, sizeof *c, cmp_count);
  return out;
}

/* The batch's CPU event's counts, their CPU time summed here from the
   samples' weights (the samples of the count's stack and thread). */
static size_t batch_counts(const Perf__V1__Batch *b, const Perf__V1__Event *e, count_t *out) {
  CHECKF(e->n_sample_weights_micros == e->n_sample_stacks && e->n_sample_stacks > 0,
         "%zu weights for %zu samples", e->n_sample_weights_micros, e->n_sample_stacks);
  for (size_t k = 0; k < e->n_stack_counts; k++) {
    const Perf__V1__StackCount *sc = e->stack_counts[k];
    long long samples = 0, cpu = 0;
    for (size_t i = 0; i < e->n_sample_stacks; i++) {
      uint32_t tid = e->n_sample_tids ? e->sample_tids[i] : e->tid;
      if (e->sample_stacks[i] != sc->stack || tid != sc->tid) continue;
      samples++;
      cpu += (long long)e->sample_weights_micros[i];
    }
    CHECK_EQ_INT(samples, sc->samples);
    out[k] = (count_t){sc->tid, (long long)batch_phase(b, sc->stack), samples, cpu};
  }
  return e->n_stack_counts;
}

/* The SDK's batch records (the file sink's <report>.batches/), decoded. */
static size_t read_batches(const char *dir, Perf__V1__Batch **out, size_t max) {
  DIR *d = opendir(dir);
  CHECKF(d != NULL, "no %s", dir);
  size_t n = 0;
  struct dirent *ent;
  while ((ent = readdir(d)) != NULL) {
    size_t len = strlen(ent->d_name);
    if (len < 6 || strcmp(ent->d_name + len - 6, ".batch") != 0) continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, ent->d_name);
    uint8_t *payload = NULL;
    size_t plen = 0;
    const char *reason = NULL;
    CHECKF(perf__spool_read_file(path, NULL, NULL, &payload, &plen, &reason) == 0, "%s: %s", path,
           reason ? reason : "?");
    CHECK(n < max);
    CHECK_EQ_INT(perf__batch_decode_stored(payload, plen, 64u << 20, &out[n]), 0);
    free(payload);
    n++;
  }
  closedir(d);
  return n;
}

/* Sums of top-stacks, the flame graph and the folded export per phase. */
typedef struct sums_s {
  long long samples[N_PHASES + 1], cpu_us[N_PHASES + 1];
} sums_t;

/* Every flame node named after a phase, added to it (each stack runs one
   phase once, so no sample counts twice). */
static void flame_sums(const json_t *node, sums_t *s) {
  const char *name = json_string_value(json_object_get(node, "name"));
  for (size_t p = 0; p < N_PHASES; p++)
    if (!strcmp(name, PHASES[p])) {
      s->samples[p] += int_of(node, "samples");
      s->cpu_us[p] += int_of(node, "cpu_us");
    }
  size_t i;
  json_t *kid;
  json_array_foreach(json_object_get(node, "children"), i, kid) flame_sums(kid, s);
}

static void config(perf_sdk_config_t *cfg, const char *dir, char *report, size_t size) {
  snprintf(report, size, "%s/report.txt", dir);
  perf_sdk_config_init(cfg);
  cfg->app_name = "units";
  cfg->data_dir = dir;
  cfg->sink = PERF_SINK_FILE;
  cfg->sink_path = report;
  cfg->hang_threshold_ms = 60000; /* the hang monitor out of the way */
  /* As test_cpu_profile: what the workload still gets on a busy machine. */
  cfg->cpu_threshold_percent = 5;
  cfg->cpu_window_ms = 300;
  cfg->cpu_cooldown_ms = 60000;
  cfg->cpu_burst_ms = 1000;
  cfg->cpu_sample_hz = 200;
  cfg->cpu_top_threads = 1 + CPU_WORKLOAD_IDLE;
}

static void case_sdk_profile(void) {
  const char *dir = tempdir_make("perf-units");
  char report[300], records[340];
  perf_sdk_config_t cfg;
  config(&cfg, dir, report, sizeof report);
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  cpu_workload_t work;
  cpu_workload_start(&work);
  perf_sdk_stats_t st;
  SDK_WAIT_FOR_STATS(st, st.events_recorded + st.cpu_bursts_empty >= 1, WAIT_MS, 5);
  cpu_workload_stop(&work);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
  st = sdk_stats();
  CHECK_EQ_INT(st.cpu_bursts_empty, 0);
  CHECK(st.events_written >= 1);

  /* The batch as the SDK wrote it, and the truth worked out from it. */
  snprintf(records, sizeof records, "%s.batches", report);
  Perf__V1__Batch *batches[8];
  size_t n_batches = read_batches(records, batches, ARRAY_LEN(batches));
  count_t truth[4096];
  size_t n_truth = 0, n_cpu = 0;
  sums_t want = {{0}, {0}};
  long long all_samples = 0, all_cpu = 0;
  for (size_t i = 0; i < n_batches; i++)
    for (size_t k = 0; k < batches[i]->n_events; k++) {
      const Perf__V1__Event *e = batches[i]->events[k];
      if (e->kind != PERF__V1__EVENT_KIND__EVENT_KIND_CPU) continue;
      n_cpu++;
      CHECK(n_truth + e->n_stack_counts <= ARRAY_LEN(truth));
      n_truth += batch_counts(batches[i], e, truth + n_truth);
    }
  CHECK_EQ_INT(n_cpu, 1);
  for (size_t i = 0; i < n_truth; i++) {
    want.samples[truth[i].phase] += truth[i].samples;
    want.cpu_us[truth[i].phase] += truth[i].cpu_us;
    all_samples += truth[i].samples, all_cpu += truth[i].cpu_us;
  }
  fprintf(stderr, "the batch: %zu stack counts, %lld samples, %lld us of CPU;", n_truth,
          all_samples, all_cpu);
  for (size_t p = 0; p < N_PHASES; p++)
    fprintf(stderr, " %s %lld samples %lld us;", PHASES[p], want.samples[p], want.cpu_us[p]);
  fprintf(stderr, "\n");
  CHECK(want.samples[0] > 0 && want.cpu_us[0] > 0 && want.samples[1] > 0);

  collector_t c;
  collector_start(&c, NULL);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  for (size_t i = 0; i < n_batches; i++) {
    CHECK_EQ_INT(batch_send(&c, batches[i], batches[i]->batch_id.data, r), 200);
    perf__v1__batch__free_unpacked(batches[i], NULL);
  }
  free(r);

  /* The event's detail: its rows added up per thread and phase, exactly
     the batch's stack counts added up so. */
  char path[128];
  snprintf(path, sizeof path, "/api/v1/events/%lld", only_event(&c, "cpu", "units"));
  json_t *detail = get_ok(&c, path);
  json_t *rows = json_object_get(detail, "stacks");
  size_t n_rows = json_array_size(rows);
  CHECK(n_rows >= 1 && n_rows <= n_truth);
  count_t got[4096];
  size_t i;
  json_t *row;
  long long prev = -1;
  json_array_foreach(rows, i, row) {
    got[i] = (count_t){int_of(row, "tid"), (long long)names_phase(json_object_get(row, "names")),
                       int_of(row, "samples"), int_of(row, "cpu_us")};
    CHECK(prev < 0 || got[i].cpu_us <= prev); /* most CPU time first */
    prev = got[i].cpu_us;
  }
  json_decref(detail);
  size_t n_merged = merge_counts(truth, n_truth);
  CHECK_EQ_INT(merge_counts(got, n_rows), n_merged);
  for (i = 0; i < n_merged; i++)
    CHECKF(!memcmp(&truth[i], &got[i], sizeof *got),
           "count %zu: tid %lld phase %lld %lld samples %lld us, the batch's: tid %lld phase %lld"
           " %lld samples %lld us",
           i, got[i].tid, got[i].phase, got[i].samples, got[i].cpu_us, truth[i].tid, truth[i].phase,
           truth[i].samples, truth[i].cpu_us);

  /* top-stacks: per phase and in all, ranked by CPU time. */
  sums_t top = {{0}, {0}};
  json_t *o = get_ok(&c, "/api/v1/top-stacks?kind=cpu&app=units&limit=1000");
  long long top_samples = 0, top_cpu = 0;
  prev = -1;
  json_array_foreach(json_object_get(o, "stacks"), i, row) {
    size_t p = names_phase(json_object_get(row, "frames"));
    long long n = int_of(row, "samples"), cpu = int_of(row, "cpu_us");
    top.samples[p] += n, top.cpu_us[p] += cpu;
    top_samples += n, top_cpu += cpu;
    CHECK(prev < 0 || cpu <= prev);
    prev = cpu;
  }
  json_decref(o);
  CHECK_EQ_INT(top_samples, all_samples);
  CHECK_EQ_INT(top_cpu, all_cpu);

  /* The flame graph: the root and every phase's nodes. */
  sums_t flame = {{0}, {0}};
  o = get_ok(&c, "/api/v1/flame?kind=cpu&app=units");
  CHECK_EQ_INT(int_of(o, "samples"), all_samples);
  CHECK_EQ_INT(int_of(o, "cpu_us"), all_cpu);
  flame_sums(o, &flame);
  json_decref(o);

  /* The folded export's CPU time: the lines through each phase. */
  sums_t folded = {{0}, {0}};
  char *text = get_text(&c, "/api/v1/export/folded?kind=cpu&app=units&value=cpu_us");
  long long folded_all = 0;
  for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
    char *space = strrchr(line, ' ');
    CHECK(space != NULL);
    long long v = atoll(space + 1);
    folded_all += v;
    *space = '\0';
    for (size_t p = 0; p < N_PHASES; p++) {
      char *at = strstr(line, PHASES[p]);
      size_t len = strlen(PHASES[p]);
      if (at && (at == line || at[-1] == ';') && (at[len] == ';' || at[len] == '\0'))
        folded.cpu_us[p] += v;
    }
  }
  free(text);
  CHECK_EQ_INT(folded_all, all_cpu);

  for (size_t p = 0; p < N_PHASES; p++) {
    CHECK_EQ_INT(top.samples[p], want.samples[p]);
    CHECK_EQ_INT(top.cpu_us[p], want.cpu_us[p]);
    CHECK_EQ_INT(flame.samples[p], want.samples[p]);
    CHECK_EQ_INT(flame.cpu_us[p], want.cpu_us[p]);
    CHECK_EQ_INT(folded.cpu_us[p], want.cpu_us[p]);
  }
  collector_stop_healthy(&c);
}

static const test_case_t g_cases[] = {
    TEST_CASE(weighted),  TEST_CASE(unweighted), TEST_CASE(bad_weights),
    TEST_CASE(bad_value), TEST_CASE(hang_time),  TEST_CASE(sdk_profile),
};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, g_cases, ARRAY_LEN(g_cases));
}
