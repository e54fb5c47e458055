/*
 * test_hang_grouping.c - hang groups against the real perf-collector (a
 * child process, tests/support/collector_rig.h): a hang's key is the part
 * of the hung thread's stack the majority of its complete samples share,
 * and the same hang repeated lands in one group even when its majority
 * reaches one frame deeper or shallower from one occurrence to the next
 * (collector/model/signature.h, docs/internals/collector.md).
 *  - repeated_hang: this process, with the real SDK (sink = http), hangs
 *    REPEATS times in busy_loop, a busy loop that calls a small clock
 *    helper, now_ms, half of its time (turns of PHASE_MS in itself and in
 *    now_ms, so the majority of a hang's ~20 samples tips between
 *    busy_loop and now_ms and below from hang to hang): one group with
 *    every hang, and its flame (/api/v1/flame?group=) shows where inside
 *    it the time went, with sample counts.
 *  - stray_and_partial: batches built with the wire encoder, each hang
 *    with a fifth of its samples stray (another leaf, another thread's
 *    root) or partial (Stack.end BAD_READ / NO_RULE: one-frame stacks
 *    ending at a `ret`, the heaviest single stack of the hang) and clone
 *    names (now_ms.constprop.0): still exactly the right group, and a
 *    second, different hang its own group.
 *  - parts_deep_above_key: the repeated_hang split seen under ASan, built
 *    with the wire encoder: a group keyed busy_loop -> spin whose later
 *    hangs went 60 % of their way into the clock read, then a hang keyed
 *    4 frames below busy_loop (now_ms -> __interceptor_clock_gettime ->
 *    clock_gettime -> __vdso_clock_gettime) with 2 of its 21 samples in
 *    spin: it joins the group (the store looks under every branch point
 *    of the hang's key, not only the last three); a hang parting from the
 *    group's path as deep but never crossing it stays a group of its own.
 * Each case runs in its own process: `test_hang_grouping <case>`.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"
#include "collector/model/signature.h"
#include "collector_rig.h"
#include "perf_sdk.h"
#include "sdk/wire/batch.h"
#include "sdk_util.h"
#include "tempdir.h"

#define REPEATS 100        /* hangs of repeated_hang */
#define HANG_MS 150.0      /* each at least this long ... */
#define HANG_SAMPLES 20    /* ... and until sampled this often */
#define PHASE_MS 0.2       /* busy_loop's turns: this long in itself, then in now_ms */
#define HANG_DEADLINE_S 20 /* a hang that cannot get its samples fails after this */

/* ---- repeated_hang: the SDK's side --------------------------------------- */

static volatile uint64_t g_sink;

/* The small clock helper the loop calls. */
static CHAIN double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void spin(unsigned work) {
  for (unsigned i = 0; i < work; i++)
    g_sink = g_sink * 6364136223846793005ULL + i;
}

/* The hang: busy until ms have passed and the monitor has taken
   HANG_SAMPLES, in turns: `work` spins in busy_loop itself (about
   PHASE_MS), then calling now_ms for PHASE_MS. */
static CHAIN void busy_loop(double ms, unsigned work) {
  CHECK_EQ_INT(perf_sdk_loop_busy(), PERF_OK);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  const uint64_t samples0 = st.samples_taken;
  double start = now_ms();
  for (unsigned i = 1;; i++) {
    spin(work);
    double phase = now_ms() + PHASE_MS, now;
    while ((now = now_ms()) < phase) {
    }
    if (now < start + ms || i % 64 != 0) continue;
    CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
    if (st.samples_taken - samples0 >= HANG_SAMPLES) break;
    CHECKF(now < start + HANG_DEADLINE_S * 1000.0,
           "%" PRIu64 " samples of the hang in %d s (%" PRIu64 " failed, %" PRIu64 " hangs)",
           st.samples_taken - samples0, HANG_DEADLINE_S, st.samples_failed, st.hangs_detected);
  }
  CHECK_EQ_INT(perf_sdk_loop_idle(), PERF_OK);
}

static CHAIN void run_hangs(unsigned work) {
  for (int i = 0; i < REPEATS; i++) {
    busy_loop(HANG_MS, work);
    usleep(5000);
  }
}

/* The spins that take PHASE_MS (the fastest of five tries). */
static unsigned calibrated_work(void) {
  enum { PROBE = 1u << 16 };
  double best = 1e9;
  for (int r = 0; r < 5; r++) {
    double t0 = now_ms();
    spin(PROBE);
    double t = now_ms() - t0;
    if (t < best) best = t;
  }
  double work = PROBE * PHASE_MS / (best > 0 ? best : 1e-3);
  return work < 1 ? 1 : work > 1e8 ? 100000000u : (unsigned)work;
}

static void sdk_run(const collector_t *c, unsigned work) {
  perf_sdk_config_t cfg;
  sdk_config_short_hangs(&cfg);
  char data_dir[128];
  snprintf(data_dir, sizeof data_dir, "%s/sdk", tempdir_make("perf-grouping"));
  sdk_config_upload(&cfg, "grouping-test", c->url, GOOD_KEY, data_dir);
  cfg.max_events_per_hour = 100000;
  CHECK_EQ_INT(perf_sdk_init(&cfg), PERF_OK);
  run_hangs(work);
  perf_sdk_stats_t st;
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.hangs_detected, REPEATS);
  CHECK_EQ_INT(perf_sdk_flush(30000), PERF_OK);
  CHECK_EQ_INT(perf_sdk_get_stats(&st), PERF_OK);
  CHECK_EQ_INT(st.batches_sent, st.batches_written);
  CHECK_EQ_INT(st.events_dropped_rate + st.events_dropped_queue + st.events_dropped_sink, 0);
  CHECK_EQ_INT(perf_sdk_shutdown(5000), PERF_OK);
}

/* ---- the API ------------------------------------------------------------ */

static json_t *top_hangs(const collector_t *c) {
  long status;
  json_t *j = get_json(c, "/api/v1/top-stacks?kind=hang&limit=100", &status);
  CHECK_EQ_INT(status, 200);
  json_t *stacks = json_object_get(j, "stacks");
  CHECK(json_is_array(stacks));
  return j;
}

static void print_json(const char *what, json_t *j) {
  char *text = json_dumps(j, JSON_INDENT(1));
  fprintf(stderr, "%s: %.4000s\n", what, text ? text : "?");
  free(text);
}

/* The index of name in a group's frames (innermost first), or -1. */
/* Whether a frame label is function `name`: the label itself, or the
   label of the function inlined there ("spin [inline]"), which depends on
   what the compiler inlined in this build. */
static bool is_function(const char *label, const char *name) {
  size_t n = strlen(name);
  return label && strncmp(label, name, n) == 0 &&
         (label[n] == '\0' || strcmp(label + n, " [inline]") == 0);
}

static long frame_index(json_t *frames, const char *name) {
  for (size_t i = 0; i < json_array_size(frames); i++)
    if (is_function(json_string_value(json_array_get(frames, i)), name)) return (long)i;
  return -1;
}

static json_t *flame_child(json_t *node, const char *name) {
  json_t *kids = json_object_get(node, "children");
  for (size_t i = 0; i < json_array_size(kids); i++) {
    json_t *k = json_array_get(kids, i);
    if (is_function(json_string_value(json_object_get(k, "name")), name)) return k;
  }
  return NULL;
}

/* The flame node at the end of path (root first) under node, or NULL. */
static json_t *flame_at(json_t *node, const char *const *path, size_t n) {
  for (size_t i = 0; node && i < n; i++)
    node = flame_child(node, path[i]);
  return node;
}

static json_int_t value_of(json_t *node) {
  return node ? json_integer_value(json_object_get(node, "samples")) : -1;
}

/* How many of the events of the group had a majority key of their own
   that differs from the group's (the occurrences the stable-key rule
   kept together), from each event's stacks. With `print`, each event's
   id, key (innermost frame, length) and samples go to stderr (to diagnose
   a split). */
static size_t keys_off_group(const collector_t *c, json_t *group_frames, bool print) {
  long status;
  json_t *list = get_json(c, "/api/v1/events?kind=hang&limit=1000", &status);
  CHECK_EQ_INT(status, 200);
  json_t *events = json_object_get(list, "events");
  size_t off = 0;
  for (size_t e = 0; e < json_array_size(events); e++) {
    char path[64];
    snprintf(path, sizeof path, "/api/v1/events/%lld",
             (long long)json_integer_value(json_object_get(json_array_get(events, e), "id")));
    json_t *d = get_json(c, path, &status);
    CHECK_EQ_INT(status, 200);
    json_t *stacks = json_object_get(d, "stacks");
    size_t n = json_array_size(stacks), max = 0;
    perf__named_stack_t *named = calloc(n ? n : 1, sizeof *named);
    uint64_t *samples = calloc(n ? n : 1, sizeof *samples);
    const char ***names = calloc(n ? n : 1, sizeof *names);
    CHECK(named && samples && names);
    for (size_t i = 0; i < n; i++) {
      json_t *s = json_array_get(stacks, i), *nm = json_object_get(s, "names");
      size_t depth = json_array_size(nm);
      CHECK((names[i] = calloc(depth ? depth : 1, sizeof *names[i])) != NULL);
      for (size_t k = 0; k < depth; k++)
        names[i][k] = json_string_value(json_array_get(nm, k));
      named[i] = (perf__named_stack_t){names[i], depth};
      samples[i] = (uint64_t)json_integer_value(json_object_get(s, "samples"));
      if (depth > max) max = depth;
    }
    const char **key = calloc(max ? max : 1, sizeof *key);
    size_t len = 0;
    CHECK(key != NULL);
    perf__hang_samples_t h = {named, samples, n};
    perf__hang_key(&h, key, max, &len);
    if (print) {
      uint64_t total = 0;
      for (size_t i = 0; i < n; i++)
        total += samples[i];
      json_t *ev = json_array_get(events, e);
      fprintf(stderr, "event %lld: group %s, key %s (%zu frames), %llu samples in %zu stacks\n",
              (long long)json_integer_value(json_object_get(ev, "id")),
              json_string_value(json_object_get(ev, "group")), len ? key[0] : "-", len,
              (unsigned long long)total, n);
      for (size_t i = 0; i < n; i++) /* innermost three frames of each stack */
        fprintf(stderr, "  %llu x %s < %s < %s\n", (unsigned long long)samples[i],
                named[i].depth > 0 ? names[i][0] : "-", named[i].depth > 1 ? names[i][1] : "-",
                named[i].depth > 2 ? names[i][2] : "-");
    }
    bool same = len == json_array_size(group_frames);
    for (size_t k = 0; same && k < len; k++)
      same = strcmp(key[k], json_string_value(json_array_get(group_frames, k))) == 0;
    off += !same;
    for (size_t i = 0; i < n; i++)
      free(names[i]);
    free(names), free(named), free(samples), free(key);
    json_decref(d);
  }
  json_decref(list);
  return off;
}

/* A group's flame, when a check is about to fail. */
static void print_group_flame(const collector_t *c, json_t *g) {
  char path[160];
  snprintf(path, sizeof path, "/api/v1/flame?kind=hang&group=%s",
           json_string_value(json_object_get(g, "signature")));
  long status;
  json_t *flame = get_json(c, path, &status);
  print_json(path, flame);
  json_decref(flame);
}

static void case_repeated_hang(void) {
  collector_t c;
  collector_start(&c, NULL);
  unsigned work = getenv("SPIN") ? (unsigned)atoi(getenv("SPIN")) : calibrated_work();
  double t0 = now_s();
  sdk_run(&c, work);
  double took = now_s() - t0;
  json_t *j = top_hangs(&c);
  json_t *stacks = json_object_get(j, "stacks");
  print_json("hang groups", j);
  fprintf(stderr, "spin %u\n", work);
  for (size_t i = 0; json_array_size(stacks) != 1 && i < json_array_size(stacks); i++)
    print_group_flame(&c, json_array_get(stacks, i));
  if (json_array_size(stacks) != 1) /* which hang opened the second group, and with what */
    keys_off_group(&c, json_object_get(json_array_get(stacks, 0), "frames"), true);
  CHECK_EQ_INT(json_array_size(stacks), 1);
  json_t *g = json_array_get(stacks, 0);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "events")), REPEATS);
  json_t *frames = json_object_get(g, "frames");
  /* The key: busy_loop and its callers, possibly deeper (now_ms and
     below) when the first hang's majority went there. */
  long loop = frame_index(frames, "busy_loop");
  CHECKF(loop >= 0 && loop <= 3, "busy_loop at %ld", loop);
  CHECK(frame_index(frames, "run_hangs") == loop + 1);
  CHECK(frame_index(frames, "main") > loop);
  if (loop > 0) { /* deeper: the clock read, or the spin where it is not inlined (-O0) */
    const char *below = json_string_value(json_array_get(frames, (size_t)loop - 1));
    CHECKF(is_function(below, "now_ms") || is_function(below, "spin"), "busy_loop calls %s", below);
  }

  /* Where the time went inside the group: its flame, with sample counts. */
  char path[160];
  snprintf(path, sizeof path, "/api/v1/flame?kind=hang&group=%s",
           json_string_value(json_object_get(g, "signature")));
  long status;
  json_t *flame = get_json(&c, path, &status);
  CHECK_EQ_INT(status, 200);
  json_int_t samples = json_integer_value(json_object_get(g, "samples"));
  CHECK_EQ_INT(value_of(flame), samples);
  /* The root down to busy_loop (the group's frames, root first). */
  size_t depth = json_array_size(frames) - (size_t)loop;
  const char **down = calloc(depth, sizeof *down);
  CHECK(down != NULL);
  for (size_t i = 0; i < depth; i++)
    down[i] = json_string_value(json_array_get(frames, json_array_size(frames) - 1 - i));
  json_t *at_loop = flame_at(flame, down, depth);
  CHECKF(at_loop != NULL, "no busy_loop in the group's flame");
  json_t *at_now = flame_child(at_loop, "now_ms");
  json_int_t in_loop = value_of(at_loop), in_now = value_of(at_now);
  json_int_t kids = 0;
  for (size_t i = 0; i < json_array_size(json_object_get(at_loop, "children")); i++)
    kids += value_of(json_array_get(json_object_get(at_loop, "children"), i));
  fprintf(stderr,
          "%d hangs in %.1f s (spin %u): group of %lld samples, %lld in busy_loop: %lld in "
          "busy_loop itself, %lld in now_ms\n",
          REPEATS, took, work, (long long)samples, (long long)in_loop, (long long)(in_loop - kids),
          (long long)in_now);
  CHECK(in_loop * 2 > samples);                   /* the majority is in busy_loop ... */
  CHECK(in_now > 0 && in_now < in_loop);          /* ... some of it in now_ms */
  json_t *at_spin = flame_child(at_loop, "spin"); /* a frame of its own at -O0 */
  CHECK(in_loop - kids + (at_spin ? value_of(at_spin) : 0) > 0); /* ... some in busy_loop itself */
  size_t off = keys_off_group(&c, frames, false);
  fprintf(stderr, "%zu of %d hangs had a majority key of their own other than the group's frames\n",
          off, REPEATS);
  free(down);
  json_decref(flame);
  json_decref(j);
  collector_stop_healthy(&c);
}

/* ---- stray_and_partial: batches from the wire encoder ---------------------- */

typedef struct app_s {
  perf__batch_builder_t *b;
  uint32_t module;
} app_t;

/* The frame of fn at pc in the app's one module. */
static uint32_t frame_of(app_t *a, const char *fn, uint64_t pc) {
  uint32_t f, frame;
  perf__batch_function_t fun = {fn, strlen(fn), NULL, 0};
  CHECK_EQ_INT(perf__batch_intern_function(a->b, &fun, &f), 0);
  perf__batch_frame_t fr = {a->module, f, pc, pc & 0xff, pc, NULL, 0};
  CHECK_EQ_INT(perf__batch_intern_frame(a->b, &fr, &frame), 0);
  return frame;
}

/* A stack of names (innermost first) with pcs base + 0x10 * depth. */
static uint32_t stack_of(app_t *a, const char *const *names, size_t n, uint64_t leaf_pc,
                         Perf__V1__StackEnd end) {
  uint32_t frames[16], out;
  CHECK(n <= 16);
  for (size_t i = 0; i < n; i++)
    frames[i] = frame_of(a, names[i], i ? 0x1000 + 0x40 * (uint64_t)(n - i) : leaf_pc);
  CHECK_EQ_INT(perf__batch_intern_stack(a->b, frames, (uint32_t)n, end, &out), 0);
  return out;
}

#define COMPLETE PERF__V1__STACK_END__STACK_END_COMPLETE
#define STACK(...)                                                                                 \
  (const char *const[]){__VA_ARGS__}, ARRAY_LEN(((const char *const[]){__VA_ARGS__}))

/* Hang i of the busy_loop kind, 100 samples: 80 complete ones in
   busy_loop (itself, or through now_ms, named as a clone every third
   hang), their share of now_ms going from 28 to 48 of them, so the
   majority key moves between busy_loop, now_ms and clock_gettime; 8 stray
   (another leaf, another thread's root); 12 partial: the epilogue `ret`
   of busy_loop alone (BAD_READ: 9 samples at one pc, as heavy as the
   heaviest complete stack of several hangs) and now_ms cut (NO_RULE).
   Each leaf is spread over a few pcs, as samples are. */
static void add_loop_hang(app_t *a, int at, int64_t start_ns) {
  int i = at + 5; /* the first hang keyed at now_ms: the others join it shallower */
  const char *now = i % 3 == 2 ? "now_ms.constprop.0" : "now_ms";
  uint32_t in_now = 28 + (uint32_t)(i % 6) * 4, self = 80 - in_now, clock = in_now - in_now / 4;
  perf__batch_begin_event(a->b);
  perf__batch_count_t counts[16];
  size_t n = 0;
  for (uint32_t k = 0; k < 4; k++) /* busy_loop itself at four pcs */
    counts[n++] = (perf__batch_count_t){
        stack_of(a, STACK("busy_loop", "run_hangs", "main", "_start"), 0x1100 + 4 * k, COMPLETE), 7,
        self / 4 + (k < self % 4)};
  counts[n++] = (perf__batch_count_t){
      stack_of(a, STACK(now, "busy_loop", "run_hangs", "main", "_start"), 0x1200, COMPLETE), 7,
      in_now / 4};
  for (uint32_t k = 0; k < 3; k++) /* the clock read at three pcs */
    counts[n++] = (perf__batch_count_t){
        stack_of(a, STACK("clock_gettime", now, "busy_loop", "run_hangs", "main", "_start"),
                 0x1300 + 8 * k, COMPLETE),
        7, clock / 3 + (k < clock % 3)};
  counts[n++] = (perf__batch_count_t){
      stack_of(a, STACK("write", "log_line", "run_hangs", "main", "_start"), 0x1400, COMPLETE), 7,
      4};
  counts[n++] = (perf__batch_count_t){
      stack_of(a, STACK("poll", "start_thread", "clone"), 0x1500, COMPLETE), 7, 4};
  counts[n++] = (perf__batch_count_t){
      stack_of(a, STACK("busy_loop"), 0x11ff, PERF__V1__STACK_END__STACK_END_BAD_READ), 7, 9};
  counts[n++] = (perf__batch_count_t){
      stack_of(a, STACK(now), 0x12ff, PERF__V1__STACK_END__STACK_END_NO_RULE), 7, 3};
  perf__batch_event_t ev = {.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG,
                            .start_unix_ns = start_ns,
                            .start_mono_ns = 1,
                            .duration_ns = 700000000,
                            .tid = 7,
                            .counts = counts,
                            .count_count = n};
  CHECK_EQ_INT(perf__batch_add_event(a->b, &ev), 0);
}

/* Another hang: stuck in parse_config, with busy_loop's samples as its
   strays (a fifth). */
static void add_parse_hang(app_t *a, int64_t start_ns) {
  perf__batch_begin_event(a->b);
  perf__batch_count_t counts[] = {
      {stack_of(a, STACK("parse_config", "load", "main", "_start"), 0x2100, COMPLETE), 7, 80},
      {stack_of(a, STACK("busy_loop", "run_hangs", "main", "_start"), 0x1100, COMPLETE), 7, 20},
  };
  perf__batch_event_t ev = {.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG,
                            .start_unix_ns = start_ns,
                            .start_mono_ns = 1,
                            .duration_ns = 300000000,
                            .tid = 7,
                            .counts = counts,
                            .count_count = ARRAY_LEN(counts)};
  CHECK_EQ_INT(perf__batch_add_event(a->b, &ev), 0);
}

static void post(const collector_t *c, app_t *a) {
  uint8_t *body, id[PERF__BATCH_ID_BYTES];
  size_t len;
  CHECK_EQ_INT(perf__batch_finish(a->b, NULL, &body, &len, id), 0);
  char hex[2 * PERF__BATCH_ID_BYTES + 1];
  batch_id_hex(id, hex);
  reply_t *r = malloc(sizeof *r);
  CHECK(r != NULL);
  long status = post_batch(c, GOOD_KEY, hex, body, len, r);
  CHECKF(status == 200, "POST /v1/batches: %ld %s", status, r->body);
  free(r);
  free(body);
}

#define LOOP_HANGS 30
#define PARSE_HANGS 10

static void case_stray_and_partial(void) {
  collector_t c;
  collector_start(&c, NULL);
  perf__batch_resource_t res = {.app_name = "grouping-wire", .app_version = "1.0"};
  app_t a = {0};
  CHECK_EQ_INT(perf__batch_builder_new(&res, NULL, &a.b), 0);
  perf__batch_module_t m = {.path = "/usr/bin/grouping-app"};
  int64_t t = (int64_t)time(NULL) * 1000000000;
  int i = 0, p = 0;
  for (int batch = 0; batch < 3; batch++) { /* interleaved, three batches */
    perf__batch_begin_event(a.b); /* the module belongs to the first event of each batch */
    CHECK_EQ_INT(perf__batch_intern_module(a.b, &m, &a.module), 0);
    for (int k = 0; k < 10 && i < LOOP_HANGS; k++, i++) {
      add_loop_hang(&a, i, t + i * 1000000);
      if (k % 3 != 2 && p < PARSE_HANGS) {
        add_parse_hang(&a, t + 500000000 + (p++) * 1000000);
      }
    }
    post(&c, &a);
  }
  CHECK(i == LOOP_HANGS && p == PARSE_HANGS);
  perf__batch_free(a.b);

  json_t *j = top_hangs(&c);
  json_t *stacks = json_object_get(j, "stacks");
  print_json("hang groups", j);
  CHECK_EQ_INT(json_array_size(stacks), 2);
  json_t *loop = NULL, *parse = NULL;
  for (size_t i = 0; i < 2; i++) {
    json_t *g = json_array_get(stacks, i);
    if (frame_index(json_object_get(g, "frames"), "busy_loop") >= 0) loop = g;
    if (frame_index(json_object_get(g, "frames"), "parse_config") == 0) parse = g;
  }
  CHECK(loop && parse);
  CHECK_EQ_INT(json_integer_value(json_object_get(loop, "events")), LOOP_HANGS);
  CHECK_EQ_INT(json_integer_value(json_object_get(loop, "samples")), LOOP_HANGS * 100);
  CHECK_EQ_INT(json_integer_value(json_object_get(parse, "events")), PARSE_HANGS);
  json_t *frames = json_object_get(loop, "frames");
  /* Its key is the first hang's (now_ms and below); it shows the part the
     majority of all its samples share: busy_loop and its callers. */
  long at = frame_index(frames, "busy_loop");
  CHECKF(at == 0, "busy_loop at %ld", at);
  CHECK(frame_index(frames, "run_hangs") == at + 1 && frame_index(frames, "_start") == at + 3);
  CHECK_EQ_INT(json_array_size(frames), (size_t)at + 4);
  for (size_t i = 0; i < json_array_size(frames); i++) /* one name for the clone */
    CHECK(strstr(json_string_value(json_array_get(frames, i)), "constprop") == NULL);
  CHECK_EQ_INT(json_array_size(json_object_get(parse, "frames")), 4);

  /* A partial stack says so: its outermost frame is <truncated: reason>.
     Any busy_loop hang has both kinds. */
  long status;
  json_t *events = get_json(&c, "/api/v1/events?kind=hang&limit=100", &status);
  CHECK_EQ_INT(status, 200);
  const char *loop_sig = json_string_value(json_object_get(loop, "signature"));
  json_t *list = json_object_get(events, "events"), *one = NULL;
  for (size_t i = 0; !one && i < json_array_size(list); i++) {
    const char *sig = json_string_value(json_object_get(json_array_get(list, i), "group"));
    if (sig && strcmp(sig, loop_sig) == 0) one = json_array_get(list, i);
  }
  CHECKF(one != NULL, "no event of group %s in the list", loop_sig);
  char path[64];
  snprintf(path, sizeof path, "/api/v1/events/%lld",
           (long long)json_integer_value(json_object_get(one, "id")));
  json_t *d = get_json(&c, path, &status);
  CHECK_EQ_INT(status, 200);
  bool bad_read = false, no_rule = false;
  json_t *ds = json_object_get(d, "stacks");
  for (size_t i = 0; i < json_array_size(ds); i++) {
    json_t *names = json_object_get(json_array_get(ds, i), "names");
    const char *last = json_string_value(json_array_get(names, json_array_size(names) - 1));
    bad_read |= json_array_size(names) == 2 && strcmp(last, "<truncated: bad read>") == 0;
    no_rule |= json_array_size(names) == 2 && strcmp(last, "<truncated: no rule>") == 0;
  }
  CHECK(bad_read && no_rule);
  json_decref(d);
  json_decref(events);
  json_decref(j);
  collector_stop_healthy(&c);
}

/* ---- parts_deep_above_key: a hang keyed 4 frames below the parting ------- */

/* The root frames of repeated_hang's stacks, innermost first: the
   collector test's own, then busy_loop's callers down to the root. */
#define LOOP_ROOT                                                                                  \
  "busy_loop", "run_hangs", "sdk_run", "case_repeated_hang", "run_case", "collector_test_main",    \
      "main", "__libc_start_call_main", "__libc_start_main", "_start"
#define LOOP_ROOT_LEN 10 /* busy_loop and its callers */
#define ASAN_CLOCK "__vdso_clock_gettime", "clock_gettime", "__interceptor_clock_gettime", "now_ms"
#define LOG_WRITE "__write_nocancel", "write", "fwrite", "log_line"

/* One hang of tid 7: spin, clock and self samples (the clock read as
   ASan's build makes it, 4 frames below busy_loop) plus log (in
   run_hangs' other callee, 4 frames below run_hangs). */
static void add_split_hang(app_t *a, int64_t start_ns, uint32_t spin, uint32_t clock, uint32_t self,
                           uint32_t log) {
  perf__batch_begin_event(a->b);
  perf__batch_count_t counts[4];
  size_t n = 0;
  if (spin)
    counts[n++] =
        (perf__batch_count_t){stack_of(a, STACK("spin", LOOP_ROOT), 0x1100, COMPLETE), 7, spin};
  if (clock)
    counts[n++] = (perf__batch_count_t){stack_of(a, STACK(ASAN_CLOCK, LOOP_ROOT), 0x1300, COMPLETE),
                                        7, clock};
  if (self)
    counts[n++] = (perf__batch_count_t){stack_of(a, STACK(LOOP_ROOT), 0x1200, COMPLETE), 7, self};
  if (log)
    counts[n++] = (perf__batch_count_t){
        stack_of(a,
                 STACK(LOG_WRITE, "run_hangs", "sdk_run", "case_repeated_hang", "run_case",
                       "collector_test_main", "main", "__libc_start_call_main", "__libc_start_main",
                       "_start"),
                 0x1400, COMPLETE),
        7, log};
  perf__batch_event_t ev = {.kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG,
                            .start_unix_ns = start_ns,
                            .start_mono_ns = 1,
                            .duration_ns = 200000000,
                            .tid = 7,
                            .counts = counts,
                            .count_count = n};
  CHECK_EQ_INT(perf__batch_add_event(a->b, &ev), 0);
}

/* A new batch's first event interns the module (as stray_and_partial). */
static void begin_batch(app_t *a, const perf__batch_module_t *m) {
  perf__batch_begin_event(a->b);
  CHECK_EQ_INT(perf__batch_intern_module(a->b, m, &a->module), 0);
}

/* The top hang groups (printed), checked to be exactly n. */
static json_t *hang_groups(const collector_t *c, size_t n) {
  json_t *j = top_hangs(c);
  print_json("hang groups", j);
  CHECK_EQ_INT(json_array_size(json_object_get(j, "stacks")), n);
  return j;
}

/* The group of stacks whose signature is sig, or NULL. */
static json_t *group_of(json_t *j, const char *sig) {
  json_t *stacks = json_object_get(j, "stacks");
  for (size_t i = 0; i < json_array_size(stacks); i++) {
    const char *s = json_string_value(json_object_get(json_array_get(stacks, i), "signature"));
    if (s && strcmp(s, sig) == 0) return json_array_get(stacks, i);
  }
  return NULL;
}

static void case_parts_deep_above_key(void) {
  collector_t c;
  collector_start(&c, NULL);
  perf__batch_resource_t res = {.app_name = "grouping-deep", .app_version = "1.0"};
  app_t a = {0};
  CHECK_EQ_INT(perf__batch_builder_new(&res, NULL, &a.b), 0);
  perf__batch_module_t m = {.path = "/usr/bin/grouping-app"};
  int64_t t = (int64_t)time(NULL) * 1000000000;

  /* The group's history: the first hang keyed busy_loop -> spin (16 of 20
     in spin), then 4 keyed busy_loop (6 in spin, 9 in the clock read, 5
     in itself: no majority below busy_loop), which join it (rule 3: a
     quarter of their own samples went into spin). 60 of its 100 samples
     through busy_loop went the clock read's way or stayed in busy_loop. */
  begin_batch(&a, &m);
  add_split_hang(&a, t, 16, 4, 0, 0);
  for (int i = 1; i <= 4; i++)
    add_split_hang(&a, t + i * 1000000, 6, 9, 5, 0);
  post(&c, &a);
  const char *group_key[] = {"spin", LOOP_ROOT};
  char sig[17];
  snprintf(sig, sizeof sig, "%016llx",
           (unsigned long long)perf__signature_hash(group_key, ARRAY_LEN(group_key)));
  json_t *j = hang_groups(&c, 1);
  json_t *g = group_of(j, sig);
  CHECKF(g != NULL, "no group %s (busy_loop -> spin)", sig);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "events")), 5);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "samples")), 100);
  json_decref(j);

  /* The hang of the flaky run: keyed at __vdso_clock_gettime (19 of 21),
     14 frames, busy_loop 4 above its end, 2 samples in spin (under an
     eighth: no turn of its own there). The group leaves its key at
     busy_loop and crosses: 60 + 2 of 121 samples there went the other's
     way. It joins the group. */
  begin_batch(&a, &m);
  add_split_hang(&a, t + 10000000, 2, 19, 0, 0);
  post(&c, &a);
  j = hang_groups(&c, 1);
  g = group_of(j, sig);
  CHECKF(g != NULL, "no group %s (busy_loop -> spin)", sig);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "events")), 6);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "samples")), 121);
  /* Shown: what the majority of its samples share (42 of 121 in spin). */
  json_t *frames = json_object_get(g, "frames");
  CHECK_EQ_INT(json_array_size(frames), LOOP_ROOT_LEN);
  CHECK(strcmp(json_string_value(json_array_get(frames, 0)), "busy_loop") == 0);
  json_decref(j);

  /* A hang parting from the group's path as deep (4 frames below
     run_hangs, where the group never went: all its samples went on into
     busy_loop), 2 of its 21 samples in spin: no crossing, a group of its
     own; the same hang again joins that one. */
  begin_batch(&a, &m);
  add_split_hang(&a, t + 20000000, 2, 0, 0, 19);
  add_split_hang(&a, t + 21000000, 2, 0, 0, 19);
  post(&c, &a);
  perf__batch_free(a.b);
  const char *log_key[] = {LOG_WRITE,
                           "run_hangs",
                           "sdk_run",
                           "case_repeated_hang",
                           "run_case",
                           "collector_test_main",
                           "main",
                           "__libc_start_call_main",
                           "__libc_start_main",
                           "_start"};
  char log_sig[17];
  snprintf(log_sig, sizeof log_sig, "%016llx",
           (unsigned long long)perf__signature_hash(log_key, ARRAY_LEN(log_key)));
  j = hang_groups(&c, 2);
  g = group_of(j, sig);
  json_t *lg = group_of(j, log_sig);
  CHECKF(g != NULL && lg != NULL, "groups %s and %s", sig, log_sig);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "events")), 6);
  CHECK_EQ_INT(json_integer_value(json_object_get(g, "samples")), 121);
  CHECK_EQ_INT(json_integer_value(json_object_get(lg, "events")), 2);
  CHECK_EQ_INT(json_integer_value(json_object_get(lg, "samples")), 42);
  CHECK_EQ_INT(json_array_size(json_object_get(lg, "frames")), ARRAY_LEN(log_key));
  json_decref(j);
  collector_stop_healthy(&c);
}

static const test_case_t g_cases[] = {
    TEST_CASE_SERIAL(repeated_hang, "a busy loop whose split between busy_loop and now_ms is "
                                    "calibrated at start; 100 hangs sampled every 5 ms"),
    TEST_CASE(stray_and_partial),
    TEST_CASE(parts_deep_above_key),
};

int main(int argc, char **argv) {
  return collector_test_main(argc, argv, g_cases, ARRAY_LEN(g_cases));
}
