/*
 * make_seeds.c - writes the seed corpus of fuzz_ingest (tests/fuzz/corpus/
 * ingest/) with the SDK's own batch encoder: real events whose pcs lie in
 * functions of this program and of libc (named on the device through the
 * live module snapshot, as the SDK does), compressed as the SDK sends them.
 *
 *   make_seeds DIR     (see tests/fuzz/README.md)
 *
 * Seeds: a hang, a CPU burst over 3 threads, a deep stack (200 frames), a
 * batch with unnamed frames (symbolize off, and pcs in no module), a fatal
 * hang carried as text, a manual capture, a batch without events, a hang
 * whose batch has resource tags and drop counters, a hang with the
 * watched loop's stats, a stats-only batch (loop stats, no event), a zstd
 * frame of garbage, and an empty file. Batch ids are random, so the bytes
 * differ from run to run; what they contain does not.
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "perf_sdk.h"
#include "sdk/pipeline/event.h"
#include "sdk/pipeline/event_encode.h"
#include "sdk/sampler/modules.h"
#include "sdk/wire/batch_decode.h"

static volatile int g_sink;

#define BODY(k)                                                                                    \
  {                                                                                                \
    g_sink += k;                                                                                   \
    g_sink ^= 3 * k;                                                                               \
    g_sink++;                                                                                      \
    g_sink += 5 * k;                                                                               \
    g_sink ^= 7;                                                                                   \
    g_sink++;                                                                                      \
  }

__attribute__((noinline, used)) static void seed_main_loop(void) BODY(1);
__attribute__((noinline, used)) static void seed_handle_request(void) BODY(2);
__attribute__((noinline, used)) static void seed_stuck_in_here(void) BODY(3);
__attribute__((noinline, used)) static void seed_parse_json(void) BODY(4);
__attribute__((noinline, used)) static void seed_hash_block(void) BODY(5);

static const uintptr_t *app_functions(void) {
  static uintptr_t fns[5];
  fns[0] = (uintptr_t)seed_main_loop;
  fns[1] = (uintptr_t)seed_handle_request;
  fns[2] = (uintptr_t)seed_stuck_in_here;
  fns[3] = (uintptr_t)seed_parse_json;
  fns[4] = (uintptr_t)seed_hash_block;
  return fns;
}

/* An event of kind with `samples` samples over `threads` threads; stack i
   of a sample is made by make_stack. */
typedef size_t (*stack_fn)(unsigned sample, uintptr_t *pcs, size_t max);

static perf__event_t *make_event(perf__modules_t *mods, perf__event_kind_t kind, unsigned samples,
                                 unsigned threads, stack_fn make_stack) {
  perf__event_t *ev = perf__event_new(kind, mods);
  if (!ev) return NULL;
  ev->tid = 4242;
  ev->start_wall_ns = 1795000000000000000LL;
  ev->start_mono_ns = 1000000000LL;
  ev->cpu_percent = kind == PERF__EVENT_CPU ? 180 : -1;
  if (kind == PERF__EVENT_MANUAL) snprintf(ev->reason, sizeof ev->reason, "seed capture");
  for (unsigned t = 0; t < threads; t++)
    perf__event_set_thread(ev, 4242 + t, t ? "worker" : "main", kind == PERF__EVENT_CPU ? 90 : -1);
  int64_t now = ev->start_mono_ns;
  uintptr_t pcs[PERF__EVENT_MAX_DEPTH];
  for (unsigned i = 0; i < samples; i++) {
    now += 10000000;
    size_t n = make_stack(i, pcs, PERF__EVENT_MAX_DEPTH);
    if (perf__event_add_sample(ev, 4242 + (pid_t)(i % threads), now, pcs, n,
                               PERF__STACK_END_COMPLETE) != 0) {
      perf__event_free(ev);
      return NULL;
    }
  }
  ev->duration_ns = now - ev->start_mono_ns;
  perf__event_finish(ev);
  return ev;
}

/* A hang: the same root, stuck in seed_stuck_in_here, leaves in libc. */
static size_t hang_stack(unsigned sample, uintptr_t *pcs, size_t max) {
  const uintptr_t *f = app_functions();
  static const char *const leaves[] = {"clock_gettime", "sched_yield", "nanosleep"};
  void *leaf = dlsym(RTLD_DEFAULT, leaves[sample % 3]);
  size_t n = 0;
  if (leaf && sample % 4) pcs[n++] = (uintptr_t)leaf + 4;
  pcs[n++] = f[2] + 8;
  pcs[n++] = f[1] + 8;
  pcs[n++] = f[0] + 8;
  return n < max ? n : max;
}

/* CPU: a few stacks of app functions. */
static size_t cpu_stack(unsigned sample, uintptr_t *pcs, size_t max) {
  const uintptr_t *f = app_functions();
  size_t n = 0;
  pcs[n++] = f[3 + sample % 2] + 4 + sample % 3;
  if (sample % 3) pcs[n++] = f[1] + 8;
  pcs[n++] = f[0] + 8;
  return n < max ? n : max;
}

/* 200 frames of recursion-like repetition. */
static size_t deep_stack(unsigned sample, uintptr_t *pcs, size_t max) {
  const uintptr_t *f = app_functions();
  size_t n = 200 < max ? 200 : max;
  for (size_t i = 0; i < n; i++)
    pcs[i] = f[(i + sample) % 5] + 4;
  return n;
}

/* Frames in no module and frames without a name. */
static size_t unnamed_stack(unsigned sample, uintptr_t *pcs, size_t max) {
  const uintptr_t *f = app_functions();
  size_t n = 0;
  pcs[n++] = 0x1000 + 16 * sample; /* no module: the runtime pc */
  pcs[n++] = 0x7ff0001234ULL;
  pcs[n++] = f[0] + 8;
  return n < max ? n : max;
}

static int write_file(const char *dir, const char *name, const void *data, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  int ok = fwrite(data, 1, len, f) == len;
  return fclose(f) == 0 && ok ? 0 : -1;
}

/* One batch of the given events, written as DIR/name; tagged: the
   resource has two tags and the batch drop counters of every reason. */
static const perf__batch_loop_stats_t LOOP = {
    3600000000000ULL, 900000000000ULL, {5000, 400, 30, 6, 2, 1, 1, 0, 1}};

/* loop: the batch's loop stats (NULL: none). */
static int write_batch(const char *dir, const char *name, perf__event_t **evs, size_t n,
                       int symbolize, int tagged, const perf__batch_loop_stats_t *loop) {
  perf__batch_resource_t res = {
      .app_name = "seed-app", .app_version = "1.2.3", .environment = "fuzz"};
  static const perf__batch_drops_t DROPS = {12, 1, 2, 3, 4};
  if (tagged) {
    res.tags[0].key = "team", res.tags[0].value = "fuzz";
    res.tags[1].key = "region", res.tags[1].value = "eu:west";
    res.tag_count = 2;
  }
  perf__batch_options_t o;
  perf__batch_options_init(&o);
  o.symbolize = symbolize;
  perf__batch_builder_t *b = NULL;
  perf__event_encoder_t *enc = perf__event_encoder_new();
  if (!enc || perf__batch_builder_new(&res, &o, &b) != PERF_OK) return -1;
  int rc = 0;
  for (size_t i = 0; !rc && i < n; i++)
    rc = evs[i] && perf__event_encode(enc, b, evs[i]) == PERF_OK ? 0 : -1;
  if (!rc && loop) rc = perf__batch_add_loop_stats(b, loop) == PERF_OK ? 0 : -1;
  uint8_t *out = NULL;
  size_t len = 0;
  if (!rc) rc = perf__batch_finish(b, tagged ? &DROPS : NULL, &out, &len, NULL) == PERF_OK ? 0 : -1;
  if (!rc) rc = write_file(dir, name, out, len);
  free(out);
  perf__batch_free(b);
  perf__event_encoder_free(enc);
  for (size_t i = 0; i < n; i++)
    perf__event_free(evs[i]);
  if (rc) fprintf(stderr, "make_seeds: cannot write %s\n", name);
  return rc;
}

/* A fatal hang as the next process reports it from a dead one's marker:
   live stacks with the dead process's reason. */
static perf__event_t *fatal_hang(perf__modules_t *mods) {
  perf__event_t *ev = make_event(mods, PERF__EVENT_FATAL_HANG, 12, 1, hang_stack);
  if (ev)
    snprintf(ev->reason, sizeof ev->reason, "process 4241 ended while its thread 4242 was hung");
  return ev;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const char *dir = argv[1];
  perf__modules_t *mods = perf__modules_acquire();
  if (!mods) return 1;
  int rc = 0;
  perf__event_t *hang[] = {make_event(mods, PERF__EVENT_HANG, 40, 1, hang_stack)};
  rc |= write_batch(dir, "hang.zst", hang, 1, 1, 0, NULL);
  perf__event_t *cpu[] = {make_event(mods, PERF__EVENT_CPU, 60, 3, cpu_stack)};
  rc |= write_batch(dir, "cpu.zst", cpu, 1, 1, 0, NULL);
  perf__event_t *deep[] = {make_event(mods, PERF__EVENT_HANG, 5, 1, deep_stack)};
  rc |= write_batch(dir, "many_frames.zst", deep, 1, 1, 0, NULL);
  perf__event_t *unnamed[] = {make_event(mods, PERF__EVENT_HANG, 6, 1, unnamed_stack),
                              make_event(mods, PERF__EVENT_CPU, 6, 2, cpu_stack)};
  rc |= write_batch(dir, "unnamed_frames.zst", unnamed, 2, 0, 0, NULL);
  perf__event_t *mixed[] = {fatal_hang(mods),
                            make_event(mods, PERF__EVENT_MANUAL, 2, 2, cpu_stack)};
  rc |= write_batch(dir, "fatal_and_manual.zst", mixed, 2, 1, 0, NULL);
  rc |= write_batch(dir, "no_events.zst", NULL, 0, 1, 0, NULL);
  rc |= write_batch(dir, "stats_only.zst", NULL, 0, 1, 0, &LOOP);
  perf__event_t *watched[] = {make_event(mods, PERF__EVENT_HANG, 8, 1, hang_stack)};
  rc |= write_batch(dir, "hang_and_loop_stats.zst", watched, 1, 1, 1, &LOOP);
  perf__event_t *tagged[] = {make_event(mods, PERF__EVENT_HANG, 8, 1, hang_stack)};
  rc |= write_batch(dir, "tags_and_drops.zst", tagged, 1, 1, 1, NULL);
  perf__modules_release(mods);

  /* A valid zstd frame whose content is not a Batch. */
  uint8_t garbage[512], frame[1024];
  for (size_t i = 0; i < sizeof garbage; i++)
    garbage[i] = (uint8_t)(i * 131 + 7);
  size_t n = ZSTD_compress(frame, sizeof frame, garbage, sizeof garbage, 3);
  rc |= ZSTD_isError(n) ? -1 : write_file(dir, "zstd_garbage.zst", frame, n);
  rc |= write_file(dir, "empty", "", 0);
  return rc ? 1 : 0;
}
