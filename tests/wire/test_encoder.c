/*
 * test_encoder.c - unit test of the wire path's batch
 * builder and decoder: real events (pcs inside functions of this binary,
 * the live module snapshot) encoded, compressed, decoded and compared table
 * by table; the max_bytes bound; symbolize off; fatal hangs copied from a marker;
 * a zstd bomb and garbage against the decoder, one decompression context
 * through failing frames then a good one; and Google's protoc --decode
 * as an independent reader of the encoding; every allocation failing in
 * turn (malloc, calloc and realloc are wrapped: link with
 * -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc).
 *
 * `test_encoder <case>` runs one case (ctest: encoder_<case>).
 */
#include "sdk/pipeline/event_encode.h"
#include "sdk/wire/batch_decode.h"

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zstd.h>

#include "check.h"
#include "perf_sdk.h"
#include "protoc_text.h"
#include "sdk/base/strbuf.h"
#include "sdk/pipeline/event_text.h"

#define DECODE_CAP (64u << 20)

/* ------------------------------------------------------------------------ */
/* Functions whose addresses make the stacks. Each is large enough that    */
/* the offsets used below stay inside it.                                   */
/* ------------------------------------------------------------------------ */

static volatile int g_sink;

/* Distinct constants keep the compiler from folding identical functions. */
#define BIG_BODY(k)                                                                                \
  {                                                                                                \
    g_sink++;                                                                                      \
    g_sink += k;                                                                                   \
    g_sink ^= 5;                                                                                   \
    g_sink++;                                                                                      \
    g_sink += 7 * k;                                                                               \
    g_sink ^= 11;                                                                                  \
    g_sink++;                                                                                      \
    g_sink += 13 * k;                                                                              \
    g_sink ^= 17;                                                                                  \
  }

__attribute__((noinline, used)) static void enc_leaf_spin(void) BIG_BODY(1)
    __attribute__((noinline, used)) static void enc_parse_blob(void) BIG_BODY(2)
        __attribute__((noinline, used)) static void enc_load_profile(void) BIG_BODY(3)
            __attribute__((noinline, used)) static void enc_handle_request(void) BIG_BODY(4)
                __attribute__((noinline, used)) static void enc_event_loop(void) BIG_BODY(5)
                    __attribute__((noinline, used)) static void enc_leaf_hash(void) BIG_BODY(6)
                        __attribute__((noinline, used)) static void enc_decode_image(void)
                            BIG_BODY(7)

                                typedef void (*fn_t)(void);

static const struct {
  fn_t fn;
  const char *name;
} g_fns[] = {
    {enc_leaf_spin, "enc_leaf_spin"},       {enc_parse_blob, "enc_parse_blob"},
    {enc_load_profile, "enc_load_profile"}, {enc_handle_request, "enc_handle_request"},
    {enc_event_loop, "enc_event_loop"},     {enc_leaf_hash, "enc_leaf_hash"},
    {enc_decode_image, "enc_decode_image"},
};

static uintptr_t at(fn_t fn, unsigned offset) {
  return (uintptr_t)fn + offset;
}

/* The three stacks of the main scenario, innermost first: S1 and S2 differ
   only in where inside enc_leaf_spin they were taken. 8 distinct frames,
   7 functions. */
#define DEPTH 5
static void three_stacks(uintptr_t s[3][DEPTH]) {
  uintptr_t tail[3] = {at(enc_load_profile, 8), at(enc_handle_request, 8), at(enc_event_loop, 8)};
  s[0][0] = at(enc_leaf_spin, 4);
  s[1][0] = at(enc_leaf_spin, 12);
  s[2][0] = at(enc_leaf_hash, 4);
  s[0][1] = s[1][1] = at(enc_parse_blob, 8);
  s[2][1] = at(enc_decode_image, 8);
  for (int i = 0; i < 3; i++)
    memcpy(&s[i][2], tail, sizeof tail);
}

/* The test function holding pc (pc - 1 for a return address). */
static size_t expected_fn(uintptr_t pc, bool ret) {
  uintptr_t lookup = ret ? pc - 1 : pc, best_start = 0;
  size_t best = 0;
  for (size_t i = 0; i < ARRAY_LEN(g_fns); i++) {
    uintptr_t start = (uintptr_t)g_fns[i].fn;
    if (start <= lookup && start >= best_start) {
      best = i;
      best_start = start;
    }
  }
  CHECK(best_start != 0);
  return best;
}

static const char *expected_name(uintptr_t pc, bool ret) {
  return g_fns[expected_fn(pc, ret)].name;
}

static uint64_t expected_offset(uintptr_t pc, bool ret) {
  return pc - (uintptr_t)g_fns[expected_fn(pc, ret)].fn;
}

static pid_t self_tid(void) {
  return gettid();
}

static perf__config_t test_config(void) {
  static char app[] = "enc-test", ver[] = "9.9.9", env[] = "ci", k[] = "region", v[] = "local";
  perf__config_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.app_name = app;
  cfg.app_version = ver;
  cfg.environment = env;
  cfg.tags[0] = (perf__tag_t){k, v};
  cfg.tag_count = 1;
  return cfg;
}

static perf__batch_resource_t test_resource(void) {
  static perf__config_t cfg;
  cfg = test_config();
  perf__batch_resource_t res;
  perf__config_batch_resource(&cfg, &res);
  return res;
}

/* One encoder for every builder of the test: its caches follow the
   builder it is given (its generation), as the writer's does. */
static perf__event_encoder_t *g_encoder;

static int add_event(perf__batch_builder_t *b, const perf__event_t *ev) {
  if (!g_encoder) CHECK((g_encoder = perf__event_encoder_new()) != NULL);
  return perf__event_encode(g_encoder, b, ev);
}

static perf__batch_builder_t *new_builder(size_t max_bytes, bool symbolize, bool uncompressed) {
  perf__batch_resource_t res = test_resource();
  perf__batch_options_t o;
  perf__batch_options_init(&o);
  if (max_bytes) o.max_bytes = max_bytes;
  o.symbolize = symbolize;
  o.uncompressed = uncompressed;
  perf__batch_builder_t *b = NULL;
  CHECK_EQ_INT(perf__batch_builder_new(&res, &o, &b), PERF_OK);
  return b;
}

#define START_WALL 1795000000123456789LL
#define START_MONO 5000000000LL

/* The main scenario: a hang of this thread, 300 samples over the three
   stacks (150 S1, 100 S2, 50 S3, interleaved), 1 ms apart. */
static perf__event_t *scenario_event(perf__modules_t *mods) {
  perf__event_t *ev = perf__event_new(PERF__EVENT_HANG, mods);
  CHECK(ev);
  ev->tid = self_tid();
  ev->start_wall_ns = START_WALL;
  ev->start_mono_ns = START_MONO;
  ev->duration_ns = 312345678;
  CHECK_EQ_INT(perf__event_set_thread(ev, ev->tid, "enc-main", -1), PERF_OK);
  uintptr_t s[3][DEPTH];
  three_stacks(s);
  for (int i = 0; i < 300; i++) {
    int which = i % 6 < 3 ? 0 : i % 6 < 5 ? 1 : 2;
    CHECK_EQ_INT(perf__event_add_sample(ev, ev->tid, START_MONO + (i + 1) * 1000000LL + i, s[which],
                                        DEPTH, PERF__STACK_END_COMPLETE),
                 PERF_OK);
  }
  perf__event_finish(ev);
  return ev;
}

static Perf__V1__Batch *finish_and_decode(perf__batch_builder_t *b, size_t *zlen, size_t *raw_len) {
  uint8_t *out = NULL, id[PERF__BATCH_ID_BYTES];
  size_t len = 0;
  size_t estimate = perf__batch_encoded_size(b);
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, id), PERF_OK);
  CHECK(out && len > 0);
  CHECK_EQ_INT(perf__batch_event_count(b), 0);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
  CHECK(bt->batch_id.len == PERF__BATCH_ID_BYTES && memcmp(bt->batch_id.data, id, sizeof id) == 0);
  size_t raw = perf__v1__batch__get_packed_size(bt);
  CHECKF(raw <= estimate && estimate - raw <= 80, "serialized %zu, estimate %zu", raw, estimate);
  if (zlen) *zlen = len;
  if (raw_len) *raw_len = raw;
  free(out);
  return bt;
}

static const char *fn_name(const Perf__V1__Batch *bt, uint32_t function) {
  CHECK(function >= 1 && function <= bt->n_functions);
  return bt->strings[bt->functions[function - 1]->name];
}

static char *exe_path(void) {
  static char path[PATH_MAX];
  CHECK(realpath("/proc/self/exe", path));
  return path;
}

/* ------------------------------------------------------------------------ */
/* Allocation failures: malloc, calloc and realloc are wrapped at link time */
/* (-Wl,--wrap), which reaches the library's objects in this static link.   */
/* ------------------------------------------------------------------------ */

static long g_alloc_count, g_fail_at; /* fail the g_fail_at-th allocation; 0 = never */

static bool fail_this_alloc(void) {
  return g_fail_at > 0 && ++g_alloc_count == g_fail_at;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);

void *__wrap_malloc(size_t n) {
  return fail_this_alloc() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size) {
  return fail_this_alloc() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n) {
  return fail_this_alloc() ? NULL : __real_realloc(p, n);
}

static void arm_alloc_failure(long nth) {
  g_alloc_count = 0;
  g_fail_at = nth;
}

/* ------------------------------------------------------------------------ */
/* Cases                                                                     */
/* ------------------------------------------------------------------------ */

/* 300 samples over 3 stacks of 5 frames: exact tables, names, module,
   build-id, and every event field back as it went in. */
static void case_roundtrip(void) {
  perf__modules_t *mods = perf__modules_acquire();
  CHECK(mods);
  perf__event_t *ev = scenario_event(mods);
  perf__batch_builder_t *b = new_builder(0, true, false);
  CHECK_EQ_INT(add_event(b, ev), PERF_OK);
  CHECK_EQ_INT(perf__batch_event_count(b), 1);
  CHECK(perf__batch_opened_ns(b) > 0);
  size_t zlen, raw;
  Perf__V1__Batch *bt = finish_and_decode(b, &zlen, &raw);
  CHECKF(zlen < raw, "compressed %zu, raw %zu", zlen, raw);

  CHECK_EQ_INT(bt->sequence, 1);
  CHECK(strcmp(bt->sdk_name, PERF_SDK_NAME) == 0 && strcmp(bt->sdk_version, PERF_SDK_VERSION) == 0);
  CHECK(bt->created_unix_nanos > 1700000000000000000LL);
  CHECK(bt->symbolized);
  const Perf__V1__Resource *r = bt->resource;
  CHECK(r && strcmp(r->app_name, "enc-test") == 0 && strcmp(r->app_version, "9.9.9") == 0 &&
        strcmp(r->environment, "ci") == 0);
  CHECK(r->n_tags == 1 && strcmp(r->tags[0]->key, "region") == 0 &&
        strcmp(r->tags[0]->value, "local") == 0);
  char host[256] = "";
  gethostname(host, sizeof host - 1);
  CHECK(strcmp(r->host, host) == 0);
  CHECK_EQ_INT(r->pid, getpid());
#if defined(__aarch64__)
  CHECK(strcmp(r->os, "linux") == 0 && strcmp(r->arch, "aarch64") == 0);
#else
  CHECK(strcmp(r->os, "linux") == 0 && strcmp(r->arch, "x86_64") == 0);
#endif
  CHECK(bt->drops && bt->drops->rate_limited == 0);

  CHECK(bt->n_strings >= 1 && strcmp(bt->strings[0], "") == 0);
  CHECK_EQ_INT(bt->n_stacks, 3);
  CHECK_EQ_INT(bt->n_frames, 8);
  CHECK_EQ_INT(bt->n_functions, 7);
  CHECK_EQ_INT(bt->n_modules, 1);
  /* "", 7 function names, this file (the frames' source lines), the thread name */
  CHECK_EQ_INT(bt->n_strings, 1 + 7 + 1 + 1);
  for (size_t i = 0; i < ARRAY_LEN(g_fns); i++) {
    size_t found = 0;
    for (size_t f = 1; f <= bt->n_functions; f++)
      found += strcmp(fn_name(bt, (uint32_t)f), g_fns[i].name) == 0;
    CHECKF(found == 1, "function %s found %zu times", g_fns[i].name, found);
  }

  /* The module: this executable, its real path and the map's build-id. */
  uintptr_t s[3][DEPTH];
  three_stacks(s);
  const perf__module_t *m = perf__module_map_find(mods->map, s[0][0]);
  CHECK(m && m->build_id_len > 0);
  const Perf__V1__Module *mod = bt->modules[0];
  CHECKF(strcmp(mod->path, exe_path()) == 0, "module %s, exe %s", mod->path, exe_path());
  CHECK(mod->build_id.len == m->build_id_len &&
        memcmp(mod->build_id.data, m->build_id, m->build_id_len) == 0);
  CHECK(mod->load_bias == m->bias && mod->start == m->start - m->bias &&
        mod->end == m->end - m->bias && !mod->only_basename);
  /* Marked the executable: the one module of the map at AT_PHDR, not libc. */
  CHECK(mod->executable && m->executable);
  size_t executables = 0;
  for (size_t i = 0; i < mods->map->count; i++) {
    const perf__module_t *x = &mods->map->modules[i];
    executables += x->executable;
    if (strstr(x->basename, "libc.so")) CHECKF(!x->executable, "%s marked", x->path);
  }
  CHECK_EQ_INT(executables, 1);

  /* The event. */
  CHECK_EQ_INT(bt->n_events, 1);
  const Perf__V1__Event *e = bt->events[0];
  CHECK(e->kind == PERF__V1__EVENT_KIND__EVENT_KIND_HANG);
  CHECK(e->start_unix_nanos == START_WALL && e->duration_nanos == 312345678);
  CHECK_EQ_INT(e->tid, self_tid());
  CHECK_EQ_INT(e->cpu_percent, -1);
  CHECK(strcmp(e->reason, "") == 0);
  CHECK_EQ_INT(e->n_threads, 1);
  CHECK_EQ_INT(e->threads[0]->tid, self_tid());
  CHECK(strcmp(bt->strings[e->threads[0]->name], "enc-main") == 0);
  CHECK_EQ_INT(e->threads[0]->cpu_percent, -1);
  CHECK_EQ_INT(e->samples_dropped, 0);

  /* Stack counts, dominant first, and every stack's frames. */
  CHECK_EQ_INT(e->n_stack_counts, 3);
  const uint32_t want_counts[3] = {150, 100, 50};
  for (int i = 0; i < 3; i++) {
    const Perf__V1__StackCount *c = e->stack_counts[i];
    CHECK_EQ_INT(c->samples, want_counts[i]);
    CHECK_EQ_INT(c->tid, self_tid());
    const Perf__V1__Stack *st = bt->stacks[c->stack - 1];
    CHECK_EQ_INT(st->n_frames, DEPTH);
    for (int f = 0; f < DEPTH; f++) {
      const Perf__V1__Frame *fr = bt->frames[st->frames[f] - 1];
      CHECK_EQ_INT(fr->module, 1);
      CHECK(fr->address == s[i][f] - m->bias);
      CHECK(fr->runtime_address == 0);
      const char *want = expected_name(s[i][f], f > 0);
      CHECKF(strcmp(fn_name(bt, fr->function), want) == 0, "stack %d frame %d: %s, want %s", i, f,
             fn_name(bt, fr->function), want);
      CHECK_EQ_INT(fr->function_offset, expected_offset(s[i][f], f > 0));
    }
  }
  CHECK_EQ_INT(e->dominant_stack, e->stack_counts[0]->stack);

  /* Samples: times back from the deltas (whole microseconds), stacks in
     order. */
  CHECK_EQ_INT(e->n_sample_stacks, 300);
  CHECK_EQ_INT(e->n_sample_offsets_micros, 300);
  CHECK_EQ_INT(e->n_sample_tids, 0); /* all of e->tid */
  CHECK_EQ_INT(e->n_sample_errors, 0);
  int64_t t = 0;
  for (int i = 0; i < 300; i++) { /* taken at start + (i + 1) ms + i ns */
    t += e->sample_offsets_micros[i];
    CHECK_EQ_INT(t, (i + 1) * 1000LL);
    int which = i % 6 < 3 ? 0 : i % 6 < 5 ? 1 : 2;
    CHECK_EQ_INT(e->sample_stacks[i], e->stack_counts[which]->stack);
  }

  perf__v1__batch__free_unpacked(bt, NULL);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

/* Several events of several kinds share the tables; per-sample threads,
   failed samples, CPU shares, reasons and drop counters round-trip. */
static void case_dedup_across_events(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__batch_builder_t *b = new_builder(0, true, false);
  perf__event_t *hang = scenario_event(mods);
  CHECK_EQ_INT(add_event(b, hang), PERF_OK);
  size_t after_one = perf__batch_encoded_size(b);
  CHECK_EQ_INT(add_event(b, hang), PERF_OK); /* the same again: only an event */
  size_t event_bytes = perf__batch_encoded_size(b) - after_one;

  /* A CPU burst over two threads, one capture failed. */
  perf__event_t *cpu = perf__event_new(PERF__EVENT_CPU, mods);
  cpu->tid = 1001;
  cpu->start_wall_ns = START_WALL + 7;
  cpu->start_mono_ns = START_MONO;
  cpu->duration_ns = 1000000000;
  cpu->cpu_percent = 187;
  CHECK_EQ_INT(perf__event_set_thread(cpu, 1001, "worker-1", 95), PERF_OK);
  CHECK_EQ_INT(perf__event_set_thread(cpu, 1002, "enc-main", 88), PERF_OK); /* a known name */
  uintptr_t s[3][DEPTH];
  three_stacks(s);
  /* Sampled at 10.5, 20.999, 21.000 and 31.9995 us: truncated to whole
     microseconds before the deltas are taken. */
  CHECK_EQ_INT(
      perf__event_add_sample(cpu, 1001, START_MONO + 10500, s[2], DEPTH, PERF__STACK_END_COMPLETE),
      PERF_OK);
  CHECK_EQ_INT(
      perf__event_add_sample(cpu, 1002, START_MONO + 20999, s[2], DEPTH, PERF__STACK_END_COMPLETE),
      PERF_OK);
  CHECK_EQ_INT(perf__event_add_failed_sample(cpu, 1002, START_MONO + 21000, PERF_E_TIMEOUT),
               PERF_OK);
  CHECK_EQ_INT(
      perf__event_add_sample(cpu, 1001, START_MONO + 31999, s[0], 3, PERF__STACK_END_COMPLETE),
      PERF_OK);
  cpu->samples_over = 17;
  perf__event_finish(cpu);
  CHECK_EQ_INT(add_event(b, cpu), PERF_OK);

  /* A manual event without samples. */
  perf__event_t *manual = perf__event_new(PERF__EVENT_MANUAL, mods);
  snprintf(manual->reason, sizeof manual->reason, "user pressed F12");
  manual->tid = 1003;
  CHECK_EQ_INT(add_event(b, manual), PERF_OK);
  CHECK_EQ_INT(perf__batch_event_count(b), 4);

  perf__batch_drops_t drops = {1, 2, 3, 4, 5};
  uint8_t *out = NULL;
  size_t len = 0;
  size_t estimate = perf__batch_encoded_size(b);
  CHECK_EQ_INT(perf__batch_finish(b, &drops, &out, &len, NULL), PERF_OK);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
  CHECK(perf__v1__batch__get_packed_size(bt) <= estimate);
  CHECK(event_bytes < 2000); /* 300 samples: a few bytes each, no tables again */

  CHECK_EQ_INT(bt->n_events, 4);
  CHECK_EQ_INT(bt->n_stacks, 4); /* the three, plus S1's outer 3 frames cut at depth 3 */
  CHECK_EQ_INT(bt->n_frames, 8);
  CHECK_EQ_INT(bt->n_functions, 7);
  CHECK_EQ_INT(bt->n_modules, 1);
  CHECK_EQ_INT(bt->n_strings, 1 + 7 + 1 + 2); /* + this file, "enc-main", "worker-1" */
  CHECK(bt->drops->rate_limited == 1 && bt->drops->queue_full == 2 && bt->drops->sink_failed == 3 &&
        bt->drops->spool_quota == 4 && bt->drops->oversized == 5);

  const Perf__V1__Event *e0 = bt->events[0], *e1 = bt->events[1];
  CHECK_EQ_INT(e0->n_stack_counts, e1->n_stack_counts);
  for (size_t i = 0; i < e0->n_stack_counts; i++)
    CHECK_EQ_INT(e0->stack_counts[i]->stack, e1->stack_counts[i]->stack);

  const Perf__V1__Event *c = bt->events[2];
  CHECK(c->kind == PERF__V1__EVENT_KIND__EVENT_KIND_CPU && c->cpu_percent == 187);
  CHECK(c->start_unix_nanos == START_WALL + 7 && c->duration_nanos == 1000000000);
  CHECK_EQ_INT(c->samples_dropped, 17);
  CHECK_EQ_INT(c->n_threads, 2);
  CHECK(c->threads[0]->tid == 1001 && c->threads[0]->cpu_percent == 95 &&
        strcmp(bt->strings[c->threads[0]->name], "worker-1") == 0);
  CHECK(c->threads[1]->tid == 1002 && c->threads[1]->cpu_percent == 88 &&
        c->threads[1]->name == e0->threads[0]->name);
  CHECK_EQ_INT(c->n_sample_stacks, 4);
  CHECK_EQ_INT(c->n_sample_tids, 4);
  const uint32_t tids[4] = {1001, 1002, 1002, 1001};
  const int64_t deltas[4] = {10, 10, 1, 10};
  for (int i = 0; i < 4; i++) {
    CHECK_EQ_INT(c->sample_tids[i], tids[i]);
    CHECK_EQ_INT(c->sample_offsets_micros[i], deltas[i]);
  }
  CHECK_EQ_INT(c->sample_stacks[2], 0);
  CHECK(c->sample_stacks[0] == c->sample_stacks[1] && c->sample_stacks[0] != 0);
  CHECK_EQ_INT(c->n_sample_errors, 1);
  CHECK_EQ_INT(c->sample_errors[0], PERF_E_TIMEOUT);
  CHECK_EQ_INT(bt->stacks[c->sample_stacks[3] - 1]->n_frames, 3);
  CHECK_EQ_INT(c->n_stack_counts, 3); /* (S3, 1001), (S3, 1002), (S1 cut, 1001) */
  CHECK_EQ_INT(c->dominant_stack, c->sample_stacks[0]);

  const Perf__V1__Event *mn = bt->events[3];
  CHECK(mn->kind == PERF__V1__EVENT_KIND__EVENT_KIND_MANUAL);
  CHECK(strcmp(mn->reason, "user pressed F12") == 0);
  CHECK(mn->n_sample_stacks == 0 && mn->n_stack_counts == 0 && mn->dominant_stack == 0);

  perf__v1__batch__free_unpacked(bt, NULL);
  free(out);
  perf__batch_free(b);
  perf__event_free(hang);
  perf__event_free(cpu);
  perf__event_free(manual);
  perf__modules_release(mods);
}

/* An event of `samples` samples whose stacks are new for every k (new
   frames, a new thread name), so each one grows the tables too. */
static perf__event_t *growing_event(perf__modules_t *mods, int k, int samples) {
  perf__event_t *ev = perf__event_new(PERF__EVENT_HANG, mods);
  ev->tid = self_tid();
  ev->start_wall_ns = START_WALL + k;
  ev->start_mono_ns = START_MONO;
  ev->duration_ns = 250000000 + k;
  char name[16];
  snprintf(name, sizeof name, "t-%d", k);
  perf__event_set_thread(ev, ev->tid, name, -1);
  uintptr_t pcs[DEPTH];
  for (int i = 0; i < samples; i++) {
    for (int f = 0; f < DEPTH; f++)
      pcs[f] = at(g_fns[(k + f + i % 3) % ARRAY_LEN(g_fns)].fn, 1 + (unsigned)(k + i % 3) % 24);
    CHECK_EQ_INT(perf__event_add_sample(ev, ev->tid, START_MONO + i * 10000000LL, pcs, DEPTH,
                                        PERF__STACK_END_COMPLETE),
                 PERF_OK);
  }
  perf__event_finish(ev);
  return ev;
}

/* Fill a 16 KiB batch until it refuses an event: what was accepted
   serializes within the bound, the refused event changed nothing, and a
   fresh batch made of the accepted events has exactly the same tables. */
/* A CPU profile's weights (Event.sample_weights_micros): one per sample,
   rounded to whole microseconds, 0 for a failed sample; none for an event
   without weights. */
static void case_cpu_weights(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__batch_builder_t *b = new_builder(0, true, false);
  perf__event_t *cpu = perf__event_new(PERF__EVENT_CPU, mods);
  cpu->weighted = true;
  cpu->tid = 1001;
  cpu->start_mono_ns = START_MONO;
  uintptr_t s[3][DEPTH];
  three_stacks(s);
  CHECK_EQ_INT(perf__event_add_weighted_sample(cpu, 1001, START_MONO + 1000, s[0], DEPTH,
                                               PERF__STACK_END_COMPLETE, PERF__SAMPLE_STATE_UNKNOWN,
                                               1500),
               PERF_OK);
  CHECK_EQ_INT(perf__event_add_failed_sample(cpu, 1001, START_MONO + 2000, PERF_E_TIMEOUT),
               PERF_OK);
  CHECK_EQ_INT(perf__event_add_weighted_sample(cpu, 1001, START_MONO + 3000, s[1], DEPTH,
                                               PERF__STACK_END_COMPLETE, PERF__SAMPLE_STATE_UNKNOWN,
                                               10000499),
               PERF_OK);
  CHECK_EQ_INT(perf__event_add_weighted_sample(cpu, 1001, START_MONO + 4000, s[0], DEPTH,
                                               PERF__STACK_END_COMPLETE, PERF__SAMPLE_STATE_UNKNOWN,
                                               2400000),
               PERF_OK);
  perf__event_finish(cpu);
  /* The stack with most CPU time first, though it has fewer samples. */
  CHECK(cpu->stacks[0].samples == 1 && cpu->stacks[0].weight_ns == 10000499);
  CHECK(cpu->stacks[1].samples == 2 && cpu->stacks[1].weight_ns == 2401500);
  CHECK_EQ_INT(add_event(b, cpu), PERF_OK);
  perf__event_t *plain = perf__event_new(PERF__EVENT_CPU, mods);
  plain->start_mono_ns = START_MONO;
  CHECK_EQ_INT(
      perf__event_add_sample(plain, 1001, START_MONO + 1000, s[0], DEPTH, PERF__STACK_END_COMPLETE),
      PERF_OK);
  CHECK_EQ_INT(add_event(b, plain), PERF_OK);
  uint8_t *out = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
  const Perf__V1__Event *e = bt->events[0];
  CHECK_EQ_INT(e->n_sample_weights_micros, 4);
  const uint64_t want[4] = {2, 0, 10000, 2400};
  for (int i = 0; i < 4; i++)
    CHECK_EQ_INT(e->sample_weights_micros[i], want[i]);
  CHECK_EQ_INT(bt->events[1]->n_sample_weights_micros, 0);
  perf__v1__batch__free_unpacked(bt, NULL);
  free(out);
  perf__batch_free(b);
  perf__event_free(cpu);
  perf__event_free(plain);
  perf__modules_release(mods);
}

/* The events of builder b's batch, finished and decoded (free with
   perf__v1__batch__free_unpacked). */
static Perf__V1__Batch *finish_decoded(perf__batch_builder_t *b) {
  uint8_t *out = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
  free(out);
  return bt;
}

/* A profile window's counts: StackCount.weight_micros (rounded) and state,
   one count per (stack, thread, state), most CPU time first, no per-sample
   arrays; and the same after the event is copied into another batch (as
   a journal replay copies it). */
static void check_profile_counts(const Perf__V1__Event *e) {
  CHECK_EQ_INT(e->kind, PERF__V1__EVENT_KIND__EVENT_KIND_PROFILE);
  CHECK_EQ_INT(e->n_stack_counts, 3);
  CHECK(e->n_sample_stacks == 0 && e->n_sample_offsets_micros == 0 &&
        e->n_sample_weights_micros == 0 && e->n_sample_states == 0);
  const uint64_t weights[3] = {30000, 12, 8};
  const uint32_t samples[3] = {3, 2, 1};
  const Perf__V1__SampleState states[3] = {PERF__V1__SAMPLE_STATE__SAMPLE_STATE_RUNNING,
                                           PERF__V1__SAMPLE_STATE__SAMPLE_STATE_RUNNING,
                                           PERF__V1__SAMPLE_STATE__SAMPLE_STATE_LOCK};
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(e->stack_counts[i]->weight_micros, weights[i]);
    CHECK_EQ_INT(e->stack_counts[i]->samples, samples[i]);
    CHECK_EQ_INT(e->stack_counts[i]->state, states[i]);
  }
  /* The same stack in two states: two counts of one stack. */
  CHECK_EQ_INT(e->stack_counts[1]->stack, e->stack_counts[2]->stack);
  CHECK(e->stack_counts[0]->stack != e->stack_counts[1]->stack);
  CHECK_EQ_INT(e->dominant_stack, e->stack_counts[0]->stack);
}

static void case_profile_counts(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__batch_builder_t *b = new_builder(0, true, false);
  perf__event_t *ev = perf__event_new(PERF__EVENT_PROFILE, mods);
  ev->weighted = true;
  ev->tid = 1001;
  ev->start_mono_ns = START_MONO;
  ev->duration_ns = 60000000000LL;
  uintptr_t s[3][DEPTH];
  three_stacks(s);
  CHECK_EQ_INT(perf__event_add_count(ev, 1001, PERF__STATE_RUNNING, s[0], DEPTH,
                                     PERF__STACK_END_COMPLETE, 2, 11600),
               PERF_OK);
  CHECK_EQ_INT(perf__event_add_count(ev, 1001, PERF__STATE_LOCK, s[0], DEPTH,
                                     PERF__STACK_END_COMPLETE, 1, 8400),
               PERF_OK);
  CHECK_EQ_INT(perf__event_add_count(ev, 1001, PERF__STATE_RUNNING, s[1], DEPTH,
                                     PERF__STACK_END_COMPLETE, 3, 30000499),
               PERF_OK);
  perf__event_finish(ev);
  CHECK_EQ_INT(ev->stack_count, 3);
  CHECK_EQ_INT(ev->sample_count, 0);
  CHECK_EQ_INT(add_event(b, ev), PERF_OK);
  Perf__V1__Batch *bt = finish_decoded(b);
  check_profile_counts(bt->events[0]);
  perf__batch_builder_t *copy = new_builder(0, true, false);
  CHECK_EQ_INT(perf__batch_copy_event(copy, bt, 0, bt->events[0]->kind, NULL), PERF_OK);
  Perf__V1__Batch *ct = finish_decoded(copy);
  check_profile_counts(ct->events[0]);
  perf__v1__batch__free_unpacked(ct, NULL);
  perf__v1__batch__free_unpacked(bt, NULL);
  perf__batch_free(copy);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

static void case_max_bytes(void) {
  const size_t max = 16384;
  perf__modules_t *mods = perf__modules_acquire();
  perf__batch_builder_t *b = new_builder(max, true, false);
  int k = 0, err;
  size_t before = 0;
  perf__event_t *ev = NULL;
  for (;;) {
    ev = growing_event(mods, k, 40);
    before = perf__batch_encoded_size(b);
    err = add_event(b, ev);
    if (err != PERF_OK) break;
    CHECK(perf__batch_encoded_size(b) <= max);
    perf__event_free(ev);
    k++;
    CHECK(k < 10000);
  }
  CHECK_EQ_INT(err, PERF_E_NO_MEMORY);
  CHECKF(k >= 5, "only %d events fit", k);
  CHECK_EQ_INT(perf__batch_event_count(b), k);
  CHECK_EQ_INT(perf__batch_encoded_size(b), before); /* refused: nothing changed */
  CHECK_EQ_INT(add_event(b, ev), PERF_E_NO_MEMORY);  /* and again */

  uint8_t *out = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  CHECKF(len <= max, "compressed %zu > %zu", len, max);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, max, &bt), PERF_OK); /* the collector's cap holds */
  size_t raw = perf__v1__batch__get_packed_size(bt);
  CHECKF(raw <= max && raw > max / 2, "serialized %zu of %zu", raw, max);
  CHECK_EQ_INT(bt->n_events, k);

  /* The same accepted events in a fresh builder: identical tables, so the
     refused event's rollback left no entry behind. */
  perf__batch_builder_t *fresh = new_builder(max, true, false);
  for (int i = 0; i < k; i++) {
    perf__event_t *again = growing_event(mods, i, 40);
    CHECK_EQ_INT(add_event(fresh, again), PERF_OK);
    perf__event_free(again);
  }
  Perf__V1__Batch *ref = finish_and_decode(fresh, NULL, NULL);
  CHECK_EQ_INT(bt->n_strings, ref->n_strings);
  CHECK_EQ_INT(bt->n_functions, ref->n_functions);
  CHECK_EQ_INT(bt->n_frames, ref->n_frames);
  CHECK_EQ_INT(bt->n_stacks, ref->n_stacks);
  CHECK_EQ_INT(bt->n_modules, ref->n_modules);
  for (size_t i = 0; i < bt->n_strings; i++)
    CHECK(strcmp(bt->strings[i], ref->strings[i]) == 0);
  for (size_t i = 0; i < bt->n_frames; i++)
    CHECK(bt->frames[i]->address == ref->frames[i]->address &&
          bt->frames[i]->function == ref->frames[i]->function);

  /* The builder is empty again: the refused event now fits. */
  CHECK_EQ_INT(perf__batch_event_count(b), 0);
  CHECK_EQ_INT(add_event(b, ev), PERF_OK);

  perf__v1__batch__free_unpacked(ref, NULL);
  perf__v1__batch__free_unpacked(bt, NULL);
  free(out);
  perf__batch_free(fresh);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

/* An event too large for an empty batch: PERF_E_TRUNCATED, nothing kept,
   and smaller events still fit afterwards. */
static void case_oversized_event(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__batch_builder_t *b = new_builder(4096, true, false);
  size_t empty = perf__batch_encoded_size(b);
  perf__event_t *big = growing_event(mods, 0, 2000);
  CHECK_EQ_INT(add_event(b, big), PERF_E_TRUNCATED);
  CHECK_EQ_INT(perf__batch_encoded_size(b), empty);
  CHECK_EQ_INT(perf__batch_event_count(b), 0);
  perf__event_t *small = growing_event(mods, 1, 10);
  CHECK_EQ_INT(add_event(b, small), PERF_OK);
  Perf__V1__Batch *bt = finish_and_decode(b, NULL, NULL);
  CHECK_EQ_INT(bt->n_events, 1);
  CHECK_EQ_INT(bt->events[0]->n_sample_stacks, 10);
  perf__v1__batch__free_unpacked(bt, NULL);
  perf__batch_free(b);
  perf__event_free(big);
  perf__event_free(small);
  perf__modules_release(mods);

  /* Options out of range are refused. */
  perf__batch_resource_t res = test_resource();
  perf__batch_options_t o;
  perf__batch_builder_t *x = NULL;
  perf__batch_options_init(&o);
  o.zstd_level = 20;
  CHECK_EQ_INT(perf__batch_builder_new(&res, &o, &x), PERF_E_INVALID_ARGUMENT);
  perf__batch_options_init(&o);
  o.max_bytes = 100;
  CHECK_EQ_INT(perf__batch_builder_new(&res, &o, &x), PERF_E_INVALID_ARGUMENT);
  CHECK(x == NULL);
}

/* Every allocation of an add or a finish failing in turn: PERF_E_NO_MEMORY
   and the batch exactly as before; once allocations work again, the same
   batch as a builder that never failed. */
static void case_alloc_failures(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *first = scenario_event(mods), *second = growing_event(mods, 3, 40);
  perf__batch_builder_t *b = new_builder(0, true, false);
  CHECK_EQ_INT(add_event(b, first), PERF_OK);
  size_t size = perf__batch_encoded_size(b);
  long failures = 0;
  for (long nth = 1;; nth++) {
    arm_alloc_failure(nth);
    int err = add_event(b, second);
    arm_alloc_failure(0);
    if (err == PERF_OK) break;
    CHECK_EQ_INT(err, PERF_E_NO_MEMORY);
    CHECK_EQ_INT(perf__batch_encoded_size(b), size);
    CHECK_EQ_INT(perf__batch_event_count(b), 1);
    failures++;
    CHECK(nth < 10000);
  }
  CHECKF(failures >= 5, "only %ld allocations in an add", failures);
  size = perf__batch_encoded_size(b);
  uint8_t *out = NULL;
  size_t len = 0;
  for (long nth = 1;; nth++) {
    arm_alloc_failure(nth);
    int err = perf__batch_finish(b, NULL, &out, &len, NULL);
    arm_alloc_failure(0);
    if (err == PERF_OK) break;
    CHECK_EQ_INT(err, PERF_E_NO_MEMORY);
    CHECK(out == NULL && perf__batch_encoded_size(b) == size);
    CHECK(nth < 10000);
  }
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
  CHECK_EQ_INT(bt->sequence, 1);

  perf__batch_builder_t *ref_b = new_builder(0, true, false);
  CHECK_EQ_INT(add_event(ref_b, first), PERF_OK);
  CHECK_EQ_INT(add_event(ref_b, second), PERF_OK);
  Perf__V1__Batch *ref = finish_and_decode(ref_b, NULL, NULL);
  CHECK_EQ_INT(perf__v1__batch__get_packed_size(bt), perf__v1__batch__get_packed_size(ref));
  CHECK(bt->n_strings == ref->n_strings && bt->n_functions == ref->n_functions &&
        bt->n_frames == ref->n_frames && bt->n_stacks == ref->n_stacks &&
        bt->n_modules == ref->n_modules && bt->n_events == 2);
  for (size_t i = 0; i < bt->n_strings; i++)
    CHECK(strcmp(bt->strings[i], ref->strings[i]) == 0);
  for (size_t i = 0; i < bt->n_stacks; i++) {
    CHECK_EQ_INT(bt->stacks[i]->n_frames, ref->stacks[i]->n_frames);
    for (size_t f = 0; f < bt->stacks[i]->n_frames; f++)
      CHECK_EQ_INT(bt->stacks[i]->frames[f], ref->stacks[i]->frames[f]);
  }

  perf__v1__batch__free_unpacked(ref, NULL);
  perf__v1__batch__free_unpacked(bt, NULL);
  free(out);
  perf__batch_free(ref_b);
  perf__batch_free(b);
  perf__event_free(first);
  perf__event_free(second);
  perf__modules_release(mods);
}

/* symbolize = false: no functions, no names; module-relative addresses. */
static void case_symbolize_off(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = scenario_event(mods);
  perf__batch_builder_t *b = new_builder(0, false, false);
  CHECK_EQ_INT(add_event(b, ev), PERF_OK);
  Perf__V1__Batch *bt = finish_and_decode(b, NULL, NULL);
  CHECK(!bt->symbolized);
  CHECK_EQ_INT(bt->n_functions, 0);
  CHECK_EQ_INT(bt->n_strings, 2); /* "" and the thread name */
  for (size_t i = 0; i < bt->n_strings; i++)
    CHECK(strncmp(bt->strings[i], "enc_", 4) != 0);
  CHECK_EQ_INT(bt->n_stacks, 3);
  CHECK_EQ_INT(bt->n_frames, 8);
  uintptr_t s[3][DEPTH];
  three_stacks(s);
  const perf__module_t *m = perf__module_map_find(mods->map, s[0][0]);
  const Perf__V1__Event *e = bt->events[0];
  for (int i = 0; i < 3; i++) {
    const Perf__V1__Stack *st = bt->stacks[e->stack_counts[i]->stack - 1];
    for (int f = 0; f < DEPTH; f++) {
      const Perf__V1__Frame *fr = bt->frames[st->frames[f] - 1];
      CHECK(fr->function == 0 && fr->function_offset == 0 && fr->module == 1);
      CHECK(fr->address == s[i][f] - m->bias);
    }
  }
  CHECK(strcmp(bt->modules[0]->path, exe_path()) == 0 &&
        bt->modules[0]->build_id.len == m->build_id_len);
  perf__v1__batch__free_unpacked(bt, NULL);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

/* A fatal hang: the hang marker is a one-event batch of the dead process;
   the next process copies its event into a batch of its own as a fatal
   hang. Everything the collector needs survives the copy: modules with
   build-ids, module-relative addresses, names, counts, samples, threads;
   and the file sink's text of it names the frames. */
static void case_fatal_hang_copy(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *live = scenario_event(mods);
  CHECK_EQ_INT(
      perf__event_add_failed_sample(live, live->tid, START_MONO + 400000000LL, PERF_E_TIMEOUT),
      PERF_OK);
  perf__batch_builder_t *mb = new_builder(0, true, false);
  CHECK_EQ_INT(add_event(mb, live), PERF_OK);
  Perf__V1__Batch *marker = finish_and_decode(mb, NULL, NULL);

  perf__batch_builder_t *b = new_builder(0, true, false);
  perf__event_t *first = scenario_event(mods);
  CHECK_EQ_INT(add_event(b, first), PERF_OK); /* tables shared with the copy */
  const char *reason = "process 4241 ended while its thread 4242 was hung";
  CHECK_EQ_INT(
      perf__batch_copy_event(b, marker, 1, PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG, reason),
      PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(
      perf__batch_copy_event(b, marker, 0, PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG, reason),
      PERF_OK);
  Perf__V1__Batch *bt = finish_and_decode(b, NULL, NULL);
  CHECK_EQ_INT(bt->n_events, 2);
  CHECK_EQ_INT(bt->n_stacks, 3); /* the copy's stacks are the first event's */
  CHECK_EQ_INT(bt->n_modules, 1);
  const Perf__V1__Event *src = marker->events[0], *e = bt->events[1];
  CHECK(e->kind == PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG);
  CHECK(strcmp(e->reason, reason) == 0);
  CHECK(e->start_unix_nanos == START_WALL && e->duration_nanos == src->duration_nanos &&
        e->tid == src->tid);
  CHECK_EQ_INT(e->n_sample_stacks, 301);
  CHECK_EQ_INT(e->n_sample_errors, 1);
  CHECK_EQ_INT(e->sample_errors[0], PERF_E_TIMEOUT);
  for (size_t i = 0; i < e->n_sample_stacks; i++)
    CHECK(e->sample_offsets_micros[i] == src->sample_offsets_micros[i]);
  CHECK_EQ_INT(e->n_threads, 1);
  CHECK(strcmp(bt->strings[e->threads[0]->name], "enc-main") == 0);
  CHECK_EQ_INT(e->n_stack_counts, 3);
  CHECK_EQ_INT(e->stack_counts[0]->samples, 150);
  CHECK_EQ_INT(e->dominant_stack, e->stack_counts[0]->stack);
  const perf__module_t *m = perf__module_map_find(mods->map, (uintptr_t)enc_leaf_spin);
  CHECK(strcmp(bt->modules[0]->path, exe_path()) == 0);
  CHECK(bt->modules[0]->build_id.len == m->build_id_len && m->build_id_len > 0 &&
        memcmp(bt->modules[0]->build_id.data, m->build_id, m->build_id_len) == 0);
  uintptr_t s[3][DEPTH];
  three_stacks(s);
  const Perf__V1__Stack *st = bt->stacks[e->stack_counts[0]->stack - 1];
  for (int f = 0; f < DEPTH; f++) {
    const Perf__V1__Frame *fr = bt->frames[st->frames[f] - 1];
    CHECK(fr->module == 1 && fr->address == s[0][f] - m->bias);
    CHECK(strcmp(fn_name(bt, fr->function), expected_name(s[0][f], f > 0)) == 0);
  }

  /* The file sink's report of the marker. */
  perf__config_t cfg = test_config();
  perf__strbuf_t sb;
  perf__strbuf_init(&sb, 1u << 20);
  CHECK_EQ_INT(perf__format_fatal_hang(&sb, marker, reason, &cfg), PERF_OK);
  CHECKF(strstr(sb.data, "event fatal_hang ") == sb.data && strstr(sb.data, "samples=300") &&
             strstr(sb.data, "failed_samples=1") && strstr(sb.data, reason) &&
             strstr(sb.data,
                    "\nfailed samples=1 error=\"the thread did not answer the sampler in time") &&
             strstr(sb.data, "stack samples=150 thread=") &&
             strstr(sb.data, " enc_leaf_spin + 4 ") && strstr(sb.data, "test_encoder.c:") &&
             strstr(sb.data, " enc_event_loop + "),
         "%s", sb.data);
  perf__strbuf_free(&sb);

  perf__v1__batch__free_unpacked(bt, NULL);
  perf__v1__batch__free_unpacked(marker, NULL);
  perf__batch_free(b);
  perf__batch_free(mb);
  perf__event_free(first);
  perf__event_free(live);
  perf__modules_release(mods);
}

/* finish empties the builder; sequence numbers advance, ids differ; reset
   drops a batch without a sequence number. */
static void case_reuse(void) {
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = scenario_event(mods);
  perf__batch_builder_t *b = new_builder(0, true, false);
  uint8_t ids[3][PERF__BATCH_ID_BYTES];
  for (int i = 0; i < 3; i++) {
    CHECK_EQ_INT(add_event(b, ev), PERF_OK);
    if (i == 1) { /* discarded */
      perf__batch_reset(b);
      CHECK_EQ_INT(perf__batch_event_count(b), 0);
      CHECK_EQ_INT(perf__batch_opened_ns(b), 0);
      CHECK_EQ_INT(add_event(b, ev), PERF_OK);
    }
    uint8_t *out = NULL;
    size_t len = 0;
    CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, ids[i]), PERF_OK);
    Perf__V1__Batch *bt = NULL;
    CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
    CHECK_EQ_INT(bt->sequence, i + 1);
    CHECK_EQ_INT(bt->n_events, 1);
    CHECK_EQ_INT(bt->n_stacks, 3);
    CHECK_EQ_INT(bt->n_frames, 8);
    CHECK_EQ_INT(bt->n_functions, 7);
    CHECK(memcmp(bt->batch_id.data, ids[i], PERF__BATCH_ID_BYTES) == 0);
    perf__v1__batch__free_unpacked(bt, NULL);
    free(out);
  }
  CHECK(memcmp(ids[0], ids[1], sizeof ids[0]) != 0 && memcmp(ids[1], ids[2], sizeof ids[0]) != 0);

  /* An empty batch is still a valid batch. */
  uint8_t *out = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
  CHECK(bt->n_events == 0 && bt->n_frames == 0 && bt->sequence == 4);
  perf__v1__batch__free_unpacked(bt, NULL);
  free(out);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

static long max_rss_kib(void) {
  struct rusage ru;
  CHECK(getrusage(RUSAGE_SELF, &ru) == 0);
  return ru.ru_maxrss;
}

/* A zstd frame of `mib` MiB of zeros in a few KiB, made with a small
   window (so only the output cap can stop it). No content size. */
static uint8_t *zstd_bomb(unsigned mib, int window_log, size_t *len) {
  ZSTD_CCtx *c = ZSTD_createCCtx();
  CHECK(c);
  CHECK(!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_compressionLevel, 1)));
  CHECK(!ZSTD_isError(ZSTD_CCtx_setParameter(c, ZSTD_c_windowLog, window_log)));
  static const uint8_t zeros[1 << 16];
  size_t cap = 1 << 20;
  uint8_t *out = malloc(cap);
  ZSTD_outBuffer o = {out, cap, 0};
  for (unsigned i = 0; i < mib * 16; i++) {
    ZSTD_inBuffer in = {zeros, sizeof zeros, 0};
    while (in.pos < in.size)
      CHECK(!ZSTD_isError(ZSTD_compressStream2(c, &o, &in, ZSTD_e_continue)));
  }
  ZSTD_inBuffer none = {NULL, 0, 0};
  size_t left;
  do {
    left = ZSTD_compressStream2(c, &o, &none, ZSTD_e_end);
    CHECK(!ZSTD_isError(left));
  } while (left);
  ZSTD_freeCCtx(c);
  *len = o.pos;
  return out;
}

/* A few KiB that decompress to 512 MiB: refused at the 1 MiB cap, with the
   process's memory growing by about the cap, not the content. A frame
   asking for a window beyond the cap is refused before decoding. */
static void case_zstd_bomb(void) {
  size_t len;
  uint8_t *bomb = zstd_bomb(512, 17, &len);
  CHECKF(len < 64 * 1024, "bomb of %zu bytes", len);
  long before = max_rss_kib();
  Perf__V1__Batch *bt = (Perf__V1__Batch *)1;
  CHECK_EQ_INT(perf__batch_decode(bomb, len, 1u << 20, &bt), PERF_E_TRUNCATED);
  CHECK(bt == NULL);
  long grown = max_rss_kib() - before;
  CHECKF(grown < 16 * 1024, "max RSS grew by %ld KiB decoding the bomb", grown);
  free(bomb);

  bomb = zstd_bomb(8, 24, &len); /* a 16 MiB window */
  CHECK_EQ_INT(perf__batch_decode(bomb, len, 1u << 20, &bt), PERF_E_TRUNCATED);
  free(bomb);

  /* A real batch decodes with the cap set to exactly its size, not one
     byte less. */
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = scenario_event(mods);
  perf__batch_builder_t *b = new_builder(0, true, false);
  CHECK_EQ_INT(add_event(b, ev), PERF_OK);
  uint8_t *out = NULL;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  unsigned long long raw = ZSTD_getFrameContentSize(out, len);
  CHECK(raw != ZSTD_CONTENTSIZE_UNKNOWN && raw != ZSTD_CONTENTSIZE_ERROR);
  CHECK_EQ_INT(perf__batch_decode(out, len, (size_t)raw, &bt), PERF_OK);
  perf__v1__batch__free_unpacked(bt, NULL);
  CHECK_EQ_INT(perf__batch_decode(out, len, (size_t)raw - 1, &bt), PERF_E_TRUNCATED);
  free(out);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

/* One zstd context through frames that fail part way (a bomb cut at the
   cap, a window over it, a frame cut short) decodes the next good batch as
   a fresh one would: the collector's threads keep theirs across batches. */
static void case_one_context_many_frames(void) {
  ZSTD_DCtx *d = ZSTD_createDCtx();
  CHECK(d != NULL);
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = scenario_event(mods);
  perf__batch_builder_t *b = new_builder(0, true, false);
  CHECK_EQ_INT(add_event(b, ev), PERF_OK);
  uint8_t *good = NULL, *raw = NULL;
  size_t good_len = 0, raw_len = 0, bomb_len = 0, fresh_len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &good, &good_len, NULL), PERF_OK);
  uint8_t *fresh = NULL;
  CHECK_EQ_INT(perf__batch_decompress(good, good_len, DECODE_CAP, &fresh, &fresh_len), PERF_OK);
  uint8_t *bombs[2] = {zstd_bomb(512, 17, &bomb_len), NULL};
  size_t wide_len = 0;
  bombs[1] = zstd_bomb(8, 24, &wide_len); /* a 16 MiB window */
  for (int round = 0; round < 3; round++) {
    CHECK_EQ_INT(perf__batch_decompress_with(d, bombs[0], bomb_len, 1u << 20, &raw, &raw_len),
                 PERF_E_TRUNCATED);
    CHECK_EQ_INT(perf__batch_decompress_with(d, bombs[1], wide_len, 1u << 20, &raw, &raw_len),
                 PERF_E_TRUNCATED);
    CHECK_EQ_INT(perf__batch_decompress_with(d, good, good_len / 2, DECODE_CAP, &raw, &raw_len),
                 PERF_E_INVALID_ARGUMENT);
    CHECK(raw == NULL);
    CHECK_EQ_INT(perf__batch_decompress_with(d, good, good_len, DECODE_CAP, &raw, &raw_len),
                 PERF_OK);
    CHECK_EQ_INT(raw_len, fresh_len);
    CHECK(memcmp(raw, fresh, raw_len) == 0);
    free(raw);
    raw = NULL;
  }
  free(bombs[0]);
  free(bombs[1]);
  free(fresh);
  free(good);
  ZSTD_freeDCtx(d);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

static uint64_t g_rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(void) {
  g_rng ^= g_rng << 13;
  g_rng ^= g_rng >> 7;
  g_rng ^= g_rng << 17;
  return (uint32_t)g_rng;
}

static void expect_refused(const uint8_t *data, size_t len, const char *what) {
  Perf__V1__Batch *bt = NULL;
  int err = perf__batch_decode(data, len, DECODE_CAP, &bt);
  CHECKF(err == PERF_E_INVALID_ARGUMENT || err == PERF_E_TRUNCATED, "%s: got %d", what, err);
  CHECK(bt == NULL);
}

/* Garbage, cut payloads, trailing bytes, flipped bits, valid zstd around a
   non-batch, and a batch with references out of range: errors, no crash. */
static void case_garbage(void) {
  uint8_t junk[4096];
  for (int round = 0; round < 2000; round++) {
    size_t n = 1 + rnd() % sizeof junk;
    for (size_t i = 0; i < n; i++)
      junk[i] = (uint8_t)rnd();
    if (round % 2) { /* a valid zstd magic in front */
      junk[0] = 0x28, junk[1] = 0xb5, junk[2] = 0x2f, junk[3] = 0xfd;
    }
    expect_refused(junk, n, "random bytes");
  }
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(NULL, 10, DECODE_CAP, &bt), PERF_E_INVALID_ARGUMENT);
  CHECK_EQ_INT(perf__batch_decode(junk, 0, DECODE_CAP, &bt), PERF_E_INVALID_ARGUMENT);

  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = scenario_event(mods);
  perf__batch_builder_t *b = new_builder(0, true, false);
  CHECK_EQ_INT(add_event(b, ev), PERF_OK);
  uint8_t *out = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  for (size_t cut = 0; cut < len; cut += 1 + cut / 16)
    if (cut) expect_refused(out, cut, "cut payload");
  uint8_t *longer = malloc(len + 1);
  memcpy(longer, out, len);
  longer[len] = 0;
  expect_refused(longer, len + 1, "trailing byte");
  for (int round = 0; round < 500; round++) { /* the checksum catches flips */
    memcpy(longer, out, len);
    longer[rnd() % len] ^= (uint8_t)(1u << (rnd() % 8));
    Perf__V1__Batch *maybe = NULL;
    if (perf__batch_decode(longer, len, DECODE_CAP, &maybe) == PERF_OK)
      perf__v1__batch__free_unpacked(maybe, NULL);
  }
  free(longer);

  /* Valid zstd around bytes that are no Batch. */
  uint8_t z[8192];
  for (size_t i = 0; i < 1000; i++)
    junk[i] = (uint8_t)rnd();
  size_t zl = ZSTD_compress(z, sizeof z, junk, 1000, 3);
  CHECK(!ZSTD_isError(zl));
  expect_refused(z, zl, "zstd of random bytes");

  /* A well-formed Batch whose frame names a module that is not there. */
  Perf__V1__Batch bad = PERF__V1__BATCH__INIT;
  uint8_t id[PERF__BATCH_ID_BYTES] = {1};
  bad.batch_id.data = id;
  bad.batch_id.len = sizeof id;
  Perf__V1__Frame frame = PERF__V1__FRAME__INIT;
  Perf__V1__Frame *frames[1] = {&frame};
  frame.module = 3;
  bad.n_frames = 1;
  bad.frames = frames;
  size_t bl = perf__v1__batch__pack(&bad, junk);
  zl = ZSTD_compress(z, sizeof z, junk, bl, 3);
  expect_refused(z, zl, "module out of range");
  frame.module = 0;
  bl = perf__v1__batch__pack(&bad, junk);
  zl = ZSTD_compress(z, sizeof z, junk, bl, 3);
  CHECK_EQ_INT(perf__batch_decode(z, zl, DECODE_CAP, &bt), PERF_OK); /* the control */
  perf__v1__batch__free_unpacked(bt, NULL);
  Perf__V1__Event event = PERF__V1__EVENT__INIT;
  Perf__V1__Event *events[1] = {&event};
  uint32_t stacks[2] = {0, 0};
  int64_t offsets[1] = {5};
  event.n_sample_stacks = 2; /* two samples, one offset */
  event.sample_stacks = stacks;
  event.n_sample_offsets_micros = 1;
  event.sample_offsets_micros = offsets;
  bad.n_events = 1;
  bad.events = events;
  bl = perf__v1__batch__pack(&bad, junk);
  zl = ZSTD_compress(z, sizeof z, junk, bl, 3);
  expect_refused(z, zl, "sample arrays of different lengths");

  free(out);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

/* Google's protoc reads the serialized batch on its own: the function
   names and the table sizes are in its text output. */
static void case_protoc_decode(void) {
  const char *protoc = PERF_PROTOC;
  CHECKF(protoc[0] && !strstr(protoc, "NOTFOUND"),
         "protoc not found (Debian: apt-get install protobuf-compiler)");
  perf__modules_t *mods = perf__modules_acquire();
  perf__event_t *ev = scenario_event(mods);
  perf__batch_builder_t *b = new_builder(0, true, true);
  CHECK_EQ_INT(add_event(b, ev), PERF_OK);
  uint8_t *out = NULL;
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, NULL), PERF_OK);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode_uncompressed(out, len, &bt), PERF_OK);
  perf__v1__batch__free_unpacked(bt, NULL);

  FILE *f = protoc_decode_batch(out, len);
  char line[4096];
  int stacks = 0, frames = 0, functions = 0, events = 0, modules = 0, sample_stacks = 0;
  int names_found[ARRAY_LEN(g_fns)] = {0};
  bool exe_found = false;
  while (fgets(line, sizeof line, f)) {
    stacks += strcmp(line, "stacks {\n") == 0;
    frames += strcmp(line, "frames {\n") == 0;
    functions += strcmp(line, "functions {\n") == 0;
    events += strcmp(line, "events {\n") == 0;
    modules += strcmp(line, "modules {\n") == 0;
    sample_stacks += strncmp(line, "  sample_stacks: ", 17) == 0;
    for (size_t i = 0; i < ARRAY_LEN(g_fns); i++) {
      char want[128];
      snprintf(want, sizeof want, "strings: \"%s\"\n", g_fns[i].name);
      names_found[i] += strcmp(line, want) == 0;
    }
    char want_path[PATH_MAX + 32];
    snprintf(want_path, sizeof want_path, "  path: \"%s\"\n", exe_path());
    exe_found = exe_found || strcmp(line, want_path) == 0;
  }
  fclose(f);
  CHECK_EQ_INT(stacks, 3);
  CHECK_EQ_INT(frames, 8);
  CHECK_EQ_INT(functions, 7);
  CHECK_EQ_INT(events, 1);
  CHECK_EQ_INT(modules, 1);
  CHECK_EQ_INT(sample_stacks, 300);
  for (size_t i = 0; i < ARRAY_LEN(g_fns); i++)
    CHECKF(names_found[i] == 1, "%s in protoc's output %d times", g_fns[i].name, names_found[i]);
  CHECK(exe_found);

  free(out);
  perf__batch_free(b);
  perf__event_free(ev);
  perf__modules_release(mods);
}

/* Loop stats: summed into the batch; a batch of stats alone opens and is
   a batch; their room, taken at their largest, keeps the size bound; a
   batch without that room refuses them unchanged, an empty one takes
   them. */
static void case_loop_stats(void) {
  perf__batch_builder_t *b = new_builder(PERF__BATCH_MIN_MAX_BYTES, true, false);
  CHECK(!perf__batch_has_content(b) && perf__batch_opened_ns(b) == 0);
  const perf__batch_loop_stats_t s = {1000, 400, {1, 2, 3, 4, 5, 6, 7, 8, 9}};
  CHECK_EQ_INT(perf__batch_add_loop_stats(b, &s), PERF_OK);
  CHECK_EQ_INT(perf__batch_add_loop_stats(b, &s), PERF_OK);
  CHECK(perf__batch_has_content(b) && perf__batch_opened_ns(b) > 0);
  CHECK_EQ_INT(perf__batch_event_count(b), 0);
  uint8_t *out = NULL, id[PERF__BATCH_ID_BYTES];
  size_t len = 0;
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, id), PERF_OK);
  CHECK(!perf__batch_has_content(b) && perf__batch_opened_ns(b) == 0);
  Perf__V1__Batch *bt = NULL;
  CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
  free(out);
  perf__batch_loop_stats_t got;
  CHECK(perf__batch_loop_stats_of(bt, &got));
  CHECK(got.watched_ns == 2000 && got.busy_ns == 800 && bt->n_events == 0);
  for (size_t i = 0; i < PERF__LOOP_BUCKETS; i++)
    CHECK_EQ_INT(got.units[i], 2 * (i + 1));
  perf__v1__batch__free_unpacked(bt, NULL);

  /* The largest values: the estimate still bounds the serialized batch. */
  perf__batch_loop_stats_t max = {UINT64_MAX, UINT64_MAX, {0}};
  for (size_t i = 0; i < PERF__LOOP_BUCKETS; i++)
    max.units[i] = UINT64_MAX;
  CHECK_EQ_INT(perf__batch_add_loop_stats(b, &max), PERF_OK);
  size_t estimate = perf__batch_encoded_size(b);
  CHECK_EQ_INT(perf__batch_finish(b, NULL, &out, &len, id), PERF_OK);
  CHECK_EQ_INT(perf__batch_decode(out, len, DECODE_CAP, &bt), PERF_OK);
  size_t raw = perf__v1__batch__get_packed_size(bt);
  CHECKF(raw <= estimate, "serialized %zu, estimate %zu", raw, estimate);
  free(out);
  perf__v1__batch__free_unpacked(bt, NULL);

  /* A batch filled to its bound: no room for the stats, nothing changed. */
  perf__batch_begin_event(b);
  char text[64];
  uint32_t index;
  int err = PERF_OK;
  for (unsigned i = 0; err == PERF_OK; i++) {
    snprintf(text, sizeof text, "filler string %u of fifty bytes or so ..........", i);
    err = perf__batch_intern_string(b, text, strlen(text), &index);
  }
  CHECK_EQ_INT(err, PERF__BATCH_FULL);
  size_t full = perf__batch_encoded_size(b);
  CHECK_EQ_INT(perf__batch_add_loop_stats(b, &s), PERF_E_NO_MEMORY);
  CHECK_EQ_INT(perf__batch_encoded_size(b), full);
  CHECK(!perf__batch_has_content(b));
  perf__batch_abort_event(b, err); /* empty again */
  CHECK_EQ_INT(perf__batch_add_loop_stats(b, &s), PERF_OK);
  CHECK_EQ_INT(perf__batch_add_loop_stats(NULL, &s), PERF_E_INVALID_ARGUMENT);
  perf__batch_free(b);
}

/* A batch at rest (perf__batch_decode_stored): a zstd frame and the same
   batch uncompressed (the file sink's records, hang markers) both decode
   to the same batch; an uncompressed one over the cap is refused as
   truncated, random bytes as invalid; perf__batch_decode (the collector's
   zstd-only path) refuses the uncompressed one. */
static void case_decode_stored(void) {
  perf__modules_t *mods = perf__modules_acquire();
  uint8_t *payload[2] = {NULL, NULL};
  size_t len[2] = {0, 0};
  for (int raw = 0; raw < 2; raw++) {
    perf__event_t *ev = scenario_event(mods);
    perf__batch_builder_t *b = new_builder(0, true, raw == 1);
    CHECK_EQ_INT(add_event(b, ev), PERF_OK);
    CHECK_EQ_INT(perf__batch_finish(b, NULL, &payload[raw], &len[raw], NULL), PERF_OK);
    perf__batch_free(b);
    perf__event_free(ev);
  }
  static const uint8_t zstd_magic[4] = {0x28, 0xb5, 0x2f, 0xfd};
  CHECK(memcmp(payload[0], zstd_magic, 4) == 0 && memcmp(payload[1], zstd_magic, 4) != 0);
  Perf__V1__Batch *bt[2] = {NULL, NULL};
  for (int raw = 0; raw < 2; raw++) {
    CHECK_EQ_INT(perf__batch_decode_stored(payload[raw], len[raw], DECODE_CAP, &bt[raw]), PERF_OK);
    CHECK_EQ_INT(bt[raw]->n_events, 1);
    CHECK_EQ_INT(bt[raw]->events[0]->n_sample_stacks, 300);
  }
  CHECK_EQ_INT(bt[0]->sequence, bt[1]->sequence);
  for (int raw = 0; raw < 2; raw++)
    perf__v1__batch__free_unpacked(bt[raw], NULL);
  Perf__V1__Batch *none = NULL;
  CHECK_EQ_INT(perf__batch_decode_stored(payload[1], len[1], len[1] - 1, &none), PERF_E_TRUNCATED);
  CHECK_EQ_INT(perf__batch_decode(payload[1], len[1], DECODE_CAP, &none), PERF_E_INVALID_ARGUMENT);
  uint8_t junk[64];
  for (size_t i = 0; i < sizeof junk; i++)
    junk[i] = (uint8_t)(0xff - i);
  CHECK_EQ_INT(perf__batch_decode_stored(junk, sizeof junk, DECODE_CAP, &none),
               PERF_E_INVALID_ARGUMENT);
  CHECK(none == NULL);
  free(payload[0]);
  free(payload[1]);
  perf__modules_release(mods);
}

static const test_case_t g_cases[] = {
    TEST_CASE(roundtrip),      TEST_CASE(dedup_across_events),
    TEST_CASE(max_bytes),      TEST_CASE(oversized_event),
    TEST_CASE(symbolize_off),  TEST_CASE(fatal_hang_copy),
    TEST_CASE(reuse),          TEST_CASE(zstd_bomb),
    TEST_CASE(garbage),        TEST_CASE(one_context_many_frames),
    TEST_CASE(protoc_decode),  TEST_CASE(alloc_failures),
    TEST_CASE(cpu_weights),    TEST_CASE(loop_stats),
    TEST_CASE(profile_counts), TEST_CASE(decode_stored),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
