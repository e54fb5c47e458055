/*
 * encode_bench.c - what the wire path's batch encoding costs and weighs:
 * encode + compress throughput (samples per second on one core) and bytes
 * per sample of a realistic batch, as perf.v1 protobuf + zstd (the SDK's
 * encoder: sdk/pipeline/event_encode.c into sdk/wire/batch_builder.c) and,
 * side by side, the same events as JSON + gzip the way sentry-style SDKs
 * send them (every sample with its own frames array of {function, module,
 * instruction_addr}, no deduplication).
 *
 * The batch: 20 events (10 hangs, 6 CPU bursts over 3 threads, 4 manual
 * captures over 8 threads) of 500 samples each, drawn with a skewed
 * distribution from 40 distinct stacks of 20-40 frames across 3 modules:
 * this executable (50 app functions), libc and libzstd. Every pc lies
 * inside a real, named function, so symbolization does real work.
 *
 * Not a test: it prints figures and a PASS or MISS line for each goal
 * (>= 500k samples/s per core; sent bytes <= 0.5x JSON + gzip) and exits 0
 * (non-zero only when the bench cannot run).
 *
 *   encode_bench [--runs N]     (default 11 timed runs per variant, about 15 s)
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "perf_sdk.h"
#include "sdk/pipeline/event_encode.h"
#include "sdk/sampler/modules.h"
#include "sdk/wire/batch_decode.h"

#define BENCH_RNG_SEED 0x2545f4914f6cdd1dULL
#include "bench_app.h"

#define EVENTS 20
#define SAMPLES_PER_EVENT 500
#define STACKS 40
#define MAX_DEPTH 40
#define WARMUP_RUNS 3

/* Exported, non-IFUNC functions (so .dynsym names them). */
static const char *const g_libc_names[] = {
    "read",   "write", "poll",    "epoll_wait", "recv",    "send",   "nanosleep",
    "malloc", "free",  "realloc", "calloc",     "qsort",   "fwrite", "fflush",
    "strtod", "fopen", "fgets",   "sendmsg",    "recvmsg",
};
static const char *const g_zstd_names[] = {
    "ZSTD_compress2",         "ZSTD_compressStream2", "ZSTD_compressCCtx",
    "ZSTD_decompressStream",  "ZSTD_decompressDCtx",  "ZSTD_createCCtx",
    "ZSTD_CCtx_setParameter", "ZSTD_compress",        "ZSTD_decompress",
};

/* ------------------------------------------------------------------------ */

typedef struct {
  uintptr_t pcs[MAX_DEPTH]; /* innermost first */
  size_t depth;
} bench_stack_t;

typedef struct {
  int64_t cpu_ns, wall_ns;
  size_t raw_bytes, sent_bytes;
} result_t;

static int64_t clock_ns(clockid_t c) {
  struct timespec ts;
  clock_gettime(c, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int cmp_i64(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

static int64_t median(int64_t *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_i64);
  return v[n / 2];
}

static size_t resolve(const char *const *names, size_t n, fn_ref_t *out) {
  size_t got = 0;
  for (size_t i = 0; i < n; i++) {
    void *p = dlsym(RTLD_DEFAULT, names[i]);
    if (p) out[got++] = (fn_ref_t){(uintptr_t)p, names[i]};
  }
  return got;
}

/* 40 stacks: main, one of 5 shared 10-frame trunks, 8-22 app frames, for
   half of them 1-4 libzstd frames, then 1-2 libc leaves. */
static void make_stacks(bench_stack_t *stacks, const fn_ref_t *libc, size_t nlibc,
                        const fn_ref_t *zstd, size_t nzstd, uintptr_t main_addr) {
  size_t trunks[5][10];
  for (int t = 0; t < 5; t++)
    for (int i = 0; i < 10; i++)
      trunks[t][i] = rnd() % APP_COUNT;
  for (int s = 0; s < STACKS; s++) {
    uintptr_t outer[MAX_DEPTH]; /* outermost first, reversed at the end */
    size_t n = 0;
    outer[n++] = main_addr + 20 + rnd() % 40;
    int t = s % 5;
    for (int i = 0; i < 10; i++)
      outer[n++] = g_app[trunks[t][i]].addr + 2 + (trunks[t][i] * 7) % 16;
    size_t app = 8 + rnd() % 15;
    for (size_t i = 0; i < app; i++)
      outer[n++] = g_app[rnd() % APP_COUNT].addr + 2 + rnd() % 16;
    if (s % 2 && nzstd) {
      size_t z = 1 + rnd() % 4;
      for (size_t i = 0; i < z; i++)
        outer[n++] = zstd[rnd() % nzstd].addr + 2 + rnd() % 16;
    }
    size_t leaves = 1 + rnd() % 2;
    for (size_t i = 0; i < leaves; i++)
      outer[n++] = libc[rnd() % nlibc].addr + 2 + rnd() % 16;
    stacks[s].depth = n;
    for (size_t i = 0; i < n; i++)
      stacks[s].pcs[i] = outer[n - 1 - i];
  }
}

/* A skewed pick among 12 of the 40 stacks, different per event. */
static int pick_stack(int event) {
  static const int weights[12] = {40, 20, 13, 10, 8, 6, 5, 4, 3, 3, 2, 2};
  int total = 116, r = (int)(rnd() % (unsigned)total), i = 0;
  while (r >= weights[i])
    r -= weights[i++];
  return (event * 7 + i * 3) % STACKS;
}

static perf__event_t **make_events(perf__modules_t *mods, const bench_stack_t *stacks) {
  perf__event_t **evs = calloc(EVENTS, sizeof *evs);
  int64_t wall = 1795247520000000000LL; /* 2026-11-21 */
  int64_t mono = 1000000000000LL;
  for (int e = 0; e < EVENTS; e++) {
    perf__event_kind_t kind = e < 10   ? PERF__EVENT_HANG
                              : e < 16 ? PERF__EVENT_CPU
                                       : PERF__EVENT_MANUAL;
    int nthreads = kind == PERF__EVENT_HANG ? 1 : kind == PERF__EVENT_CPU ? 3 : 8;
    perf__event_t *ev = perf__event_new(kind, mods);
    if (!ev) return NULL;
    ev->tid = 20000;
    ev->start_wall_ns = wall + e * 60000000000LL;
    ev->start_mono_ns = mono + e * 60000000000LL;
    ev->cpu_percent = kind == PERF__EVENT_CPU ? 150 + e : -1;
    if (kind == PERF__EVENT_MANUAL) snprintf(ev->reason, sizeof ev->reason, "support request");
    for (int t = 0; t < nthreads; t++) {
      char name[16];
      snprintf(name, sizeof name, t ? "worker-%d" : "main", t);
      perf__event_set_thread(ev, 20000 + t, name, kind == PERF__EVENT_CPU ? 90 - 20 * t : -1);
    }
    int64_t t_ns = ev->start_mono_ns;
    for (int i = 0; i < SAMPLES_PER_EVENT; i++) {
      t_ns += 10000000 + rnd() % 500000; /* 100 Hz with jitter */
      const bench_stack_t *st = &stacks[pick_stack(e)];
      if (perf__event_add_sample(ev, 20000 + i % nthreads, t_ns, st->pcs, st->depth,
                                 PERF__STACK_END_COMPLETE) != 0)
        return NULL;
    }
    ev->duration_ns = t_ns - ev->start_mono_ns + 5000000;
    perf__event_finish(ev);
    evs[e] = ev;
  }
  return evs;
}

/* ------------------------------------------------------------------------ */
/* Variant A: the SDK's encoder.                                             */
/* ------------------------------------------------------------------------ */

static perf__event_encoder_t *g_encoder; /* SDK events into batches, as the writer does */

static int run_protobuf(perf__batch_builder_t *b, perf__event_t **evs, result_t *r) {
  int64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), w0 = clock_ns(CLOCK_MONOTONIC);
  for (int e = 0; e < EVENTS; e++)
    if (perf__event_encode(g_encoder, b, evs[e]) != 0) return -1;
  uint8_t *out = NULL;
  size_t len = 0;
  if (perf__batch_finish(b, NULL, &out, &len, NULL) != 0) return -1;
  r->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  r->wall_ns = clock_ns(CLOCK_MONOTONIC) - w0;
  r->sent_bytes = len;
  Perf__V1__Batch *bt = NULL;
  if (perf__batch_decode(out, len, 64u << 20, &bt) != 0) return -1;
  r->raw_bytes = perf__v1__batch__get_packed_size(bt);
  size_t samples = 0;
  for (size_t i = 0; i < bt->n_events; i++)
    samples += bt->events[i]->n_sample_stacks;
  perf__v1__batch__free_unpacked(bt, NULL);
  free(out);
  return samples == EVENTS * SAMPLES_PER_EVENT ? 0 : -1;
}

/* Where the serialized bytes of a batch go: the tables, and the events'
   per-sample columns (payload bytes of the packed arrays). */
static void print_breakdown(const Perf__V1__Batch *bt) {
  size_t strings = 0, tables = 0, offsets = 0, stacks = 0, tids = 0, rest = 0;
  for (size_t i = 0; i < bt->n_strings; i++)
    strings += strlen(bt->strings[i]) + 2;
  for (size_t i = 0; i < bt->n_modules; i++)
    tables += perf__v1__module__get_packed_size(bt->modules[i]) + 2;
  for (size_t i = 0; i < bt->n_functions; i++)
    tables += perf__v1__function__get_packed_size(bt->functions[i]) + 2;
  for (size_t i = 0; i < bt->n_frames; i++)
    tables += perf__v1__frame__get_packed_size(bt->frames[i]) + 2;
  for (size_t i = 0; i < bt->n_stacks; i++)
    tables += perf__v1__stack__get_packed_size(bt->stacks[i]) + 2;
  for (size_t i = 0; i < bt->n_events; i++) {
    const Perf__V1__Event *e = bt->events[i];
    size_t o = 0, st = 0, t = 0;
    for (size_t j = 0; j < e->n_sample_offsets_micros; j++) {
      uint64_t z = ((uint64_t)e->sample_offsets_micros[j] << 1) ^
                   (uint64_t)(e->sample_offsets_micros[j] >> 63);
      do {
        o++;
        z >>= 7;
      } while (z);
    }
    for (size_t j = 0; j < e->n_sample_stacks; j++)
      st += 1 + (e->sample_stacks[j] >= 128);
    for (size_t j = 0; j < e->n_sample_tids; j++)
      t += e->sample_tids[j] < (1u << 14) ? 2 : 3;
    offsets += o;
    stacks += st;
    tids += t;
    rest += perf__v1__event__get_packed_size(e) - o - st - t;
  }
  printf(
      "\nserialized batch (%zu B) by part: strings %zu, modules + functions + frames + stacks %zu; "
      "per sample: time deltas %zu (%.2f B/sample), stack indices %zu, thread ids %zu; other "
      "event fields %zu; distinct frames %zu, functions %zu, stacks %zu\n",
      perf__v1__batch__get_packed_size(bt), strings, tables, offsets,
      (double)offsets / (EVENTS * SAMPLES_PER_EVENT), stacks, tids, rest, bt->n_frames,
      bt->n_functions, bt->n_stacks);
}

/* ------------------------------------------------------------------------ */
/* Variant B: sentry-style JSON + gzip.                                      */
/* ------------------------------------------------------------------------ */

typedef struct {
  const char *function, *module;
  char addr[24];
} json_frame_t;

static json_t *json_event(const perf__event_t *ev, int index) {
  /* Each distinct stack of the event symbolized once; each sample then gets
     its own frames array (no dedup on the wire). */
  json_frame_t *sym = malloc(ev->frame_count * sizeof *sym);
  for (size_t s = 0; s < ev->stack_count; s++) {
    const perf__stack_t *st = &ev->stacks[s];
    for (uint32_t f = 0; f < st->depth; f++) {
      perf__frame_info_t fi;
      uintptr_t pc = ev->frames[st->first + f];
      perf__modules_symbolize(ev->mods, pc, f > 0, &fi);
      json_frame_t *j = &sym[st->first + f];
      j->function = perf__frame_symbol(&fi) ? perf__frame_symbol(&fi) : "??";
      j->module = fi.module;
      snprintf(j->addr, sizeof j->addr, "0x%" PRIxPTR, pc);
    }
  }
  json_t *o = json_object();
  char id[40];
  snprintf(id, sizeof id, "%032x", 0x5eed0000 + index);
  json_object_set_new(o, "event_id", json_string(id));
  json_object_set_new(o, "type", json_string(perf__event_kind_name(ev->kind)));
  json_object_set_new(o, "platform", json_string("native"));
  json_object_set_new(o, "timestamp", json_real((double)ev->start_wall_ns / 1e9));
  json_object_set_new(o, "duration_ms", json_real((double)ev->duration_ns / 1e6));
  json_object_set_new(o, "thread_id", json_integer(ev->tid));
  if (ev->cpu_percent >= 0) json_object_set_new(o, "cpu_percent", json_integer(ev->cpu_percent));
  if (ev->reason[0]) json_object_set_new(o, "reason", json_string(ev->reason));
  json_object_set_new(o, "release", json_string("bench-app@2.3.1"));
  json_object_set_new(o, "environment", json_string("production"));
  json_t *threads = json_array();
  for (size_t t = 0; t < ev->thread_count; t++) {
    json_t *th = json_object();
    json_object_set_new(th, "id", json_integer(ev->threads[t].tid));
    json_object_set_new(th, "name", json_string(ev->threads[t].name));
    if (ev->threads[t].cpu_percent >= 0)
      json_object_set_new(th, "cpu_percent", json_integer(ev->threads[t].cpu_percent));
    json_array_append_new(threads, th);
  }
  json_object_set_new(o, "threads", threads);
  /* debug_meta: the images, as native sentry events carry them. */
  json_t *images = json_array();
  for (size_t m = 0; m < ev->mods->map->count; m++) {
    const perf__module_t *mod = &ev->mods->map->modules[m];
    json_t *im = json_object();
    char buf[2 * PERF__BUILD_ID_MAX + 1], addr[24];
    for (size_t i = 0; i < mod->build_id_len; i++)
      snprintf(buf + 2 * i, 3, "%02x", mod->build_id[i]);
    buf[2 * mod->build_id_len] = '\0';
    snprintf(addr, sizeof addr, "0x%" PRIxPTR, mod->start);
    json_object_set_new(im, "type", json_string("elf"));
    json_object_set_new(im, "code_file", json_string(mod->path));
    json_object_set_new(im, "code_id", json_string(buf));
    json_object_set_new(im, "image_addr", json_string(addr));
    json_object_set_new(im, "image_size", json_integer((json_int_t)(mod->end - mod->start)));
    json_array_append_new(images, im);
  }
  json_t *meta = json_object();
  json_object_set_new(meta, "images", images);
  json_object_set_new(o, "debug_meta", meta);
  json_t *samples = json_array();
  for (size_t i = 0; i < ev->sample_count; i++) {
    const perf__sample_t *s = &ev->samples[i];
    json_t *js = json_object();
    json_object_set_new(
        js, "timestamp",
        json_real((double)(ev->start_wall_ns + (s->mono_ns - ev->start_mono_ns)) / 1e9));
    json_object_set_new(js, "thread_id", json_integer(s->tid));
    json_t *frames = json_array();
    if (s->stack >= 0) {
      const perf__stack_t *st = &ev->stacks[s->stack];
      for (uint32_t f = 0; f < st->depth; f++) {
        const json_frame_t *j = &sym[st->first + f];
        json_t *jf = json_object();
        json_object_set_new(jf, "function", json_string(j->function));
        json_object_set_new(jf, "module", json_string(j->module));
        json_object_set_new(jf, "instruction_addr", json_string(j->addr));
        json_array_append_new(frames, jf);
      }
    }
    json_object_set_new(js, "frames", frames);
    json_array_append_new(samples, js);
  }
  json_object_set_new(o, "samples", samples);
  free(sym);
  return o;
}

static int run_json(perf__event_t **evs, result_t *r) {
  int64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID), w0 = clock_ns(CLOCK_MONOTONIC);
  json_t *root = json_array();
  for (int e = 0; e < EVENTS; e++)
    json_array_append_new(root, json_event(evs[e], e));
  char *text = json_dumps(root, JSON_COMPACT);
  json_decref(root);
  if (!text) return -1;
  size_t n = strlen(text);
  z_stream z;
  memset(&z, 0, sizeof z);
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16 /* gzip */, 8, Z_DEFAULT_STRATEGY) != Z_OK) return -1;
  uLong cap = deflateBound(&z, (uLong)n);
  unsigned char *gz = malloc(cap);
  z.next_in = (unsigned char *)text;
  z.avail_in = (uInt)n;
  z.next_out = gz;
  z.avail_out = (uInt)cap;
  int rc = deflate(&z, Z_FINISH);
  size_t gzlen = z.total_out;
  deflateEnd(&z);
  r->cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
  r->wall_ns = clock_ns(CLOCK_MONOTONIC) - w0;
  r->raw_bytes = n;
  r->sent_bytes = gzlen;
  free(gz);
  free(text);
  return rc == Z_STREAM_END ? 0 : -1;
}

/* ------------------------------------------------------------------------ */

typedef struct {
  const char *label;
  int level;
  bool symbolize;
  bool json;
  int64_t cpu_med, wall_med;
  size_t raw, sent;
} variant_t;

static int measure(variant_t *v, perf__event_t **evs, int runs) {
  perf__batch_builder_t *b = NULL;
  if (!v->json) {
    perf__batch_resource_t res = {
        .app_name = "bench-app", .app_version = "2.3.1", .environment = "production"};
    perf__batch_options_t o;
    perf__batch_options_init(&o);
    o.zstd_level = v->level;
    o.symbolize = v->symbolize;
    if (perf__batch_builder_new(&res, &o, &b) != 0) return -1;
  }
  int64_t *cpu = calloc((size_t)runs, sizeof *cpu), *wall = calloc((size_t)runs, sizeof *wall);
  result_t r = {0};
  int err = 0;
  for (int i = 0; i < WARMUP_RUNS + runs && !err; i++) {
    err = v->json ? run_json(evs, &r) : run_protobuf(b, evs, &r);
    if (i >= WARMUP_RUNS) {
      cpu[i - WARMUP_RUNS] = r.cpu_ns;
      wall[i - WARMUP_RUNS] = r.wall_ns;
    }
  }
  if (!err) {
    v->cpu_med = median(cpu, (size_t)runs);
    v->wall_med = median(wall, (size_t)runs);
    v->raw = r.raw_bytes;
    v->sent = r.sent_bytes;
  }
  free(cpu);
  free(wall);
  perf__batch_free(b);
  return err;
}

int main(int argc, char **argv) {
  int runs = 11;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
      runs = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--runs N]\n", argv[0]);
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  if (!(g_encoder = perf__event_encoder_new())) return 1;

  fn_ref_t libc[sizeof g_libc_names / sizeof g_libc_names[0]];
  fn_ref_t zstd[sizeof g_zstd_names / sizeof g_zstd_names[0]];
  size_t nlibc = resolve(g_libc_names, sizeof g_libc_names / sizeof g_libc_names[0], libc);
  size_t nzstd = resolve(g_zstd_names, sizeof g_zstd_names / sizeof g_zstd_names[0], zstd);
  if (!nlibc || !nzstd) {
    fprintf(stderr, "encode_bench: libc or libzstd functions not found\n");
    return 1;
  }
  perf__modules_t *mods = perf__modules_acquire();
  if (!mods) return 1;
  static bench_stack_t stacks[STACKS];
  make_stacks(stacks, libc, nlibc, zstd, nzstd, (uintptr_t)main);
  perf__event_t **evs = make_events(mods, stacks);
  if (!evs) return 1;

  /* What the batch holds. */
  size_t frames = 0, min_d = MAX_DEPTH, max_d = 0, unnamed = 0, distinct_pcs = 0;
  const perf__module_t *seen[8];
  size_t nseen = 0;
  uintptr_t *pcs = malloc(STACKS * MAX_DEPTH * sizeof *pcs);
  for (int s = 0; s < STACKS; s++) {
    frames += stacks[s].depth;
    if (stacks[s].depth < min_d) min_d = stacks[s].depth;
    if (stacks[s].depth > max_d) max_d = stacks[s].depth;
    for (size_t f = 0; f < stacks[s].depth; f++) {
      uintptr_t pc = stacks[s].pcs[f];
      bool dup = false;
      for (size_t k = 0; k < distinct_pcs && !dup; k++)
        dup = pcs[k] == pc;
      if (dup) continue;
      pcs[distinct_pcs++] = pc;
      perf__frame_info_t fi;
      perf__modules_symbolize(mods, pc, f > 0, &fi);
      unnamed += perf__frame_symbol(&fi) == NULL;
      const perf__module_t *m = perf__module_map_find(mods->map, f > 0 ? pc - 1 : pc);
      bool known = false;
      for (size_t k = 0; k < nseen; k++)
        known = known || seen[k] == m;
      if (!known && nseen < 8) seen[nseen++] = m;
    }
  }
  free(pcs);
  printf("encode_bench: %d events x %d samples = %d samples; %d distinct stacks of %zu-%zu frames "
         "(mean %.1f), %zu distinct pcs (%zu unnamed) in %zu modules:",
         EVENTS, SAMPLES_PER_EVENT, EVENTS * SAMPLES_PER_EVENT, STACKS, min_d, max_d,
         (double)frames / STACKS, distinct_pcs, unnamed, nseen);
  for (size_t k = 0; k < nseen; k++)
    printf(" %s", seen[k] ? seen[k]->basename : "??");
  printf("\nruns: %d timed (median), after %d warm-up; one thread; times are its CPU time\n\n",
         runs, WARMUP_RUNS);

  variant_t v[] = {
      {"protobuf + zstd 3 (default)", 3, true, false, 0, 0, 0, 0},
      {"protobuf + zstd 1", 1, true, false, 0, 0, 0, 0},
      {"protobuf + zstd 9", 9, true, false, 0, 0, 0, 0},
      {"protobuf + zstd 19", 19, true, false, 0, 0, 0, 0},
      {"protobuf + zstd 3, symbolize off", 3, false, false, 0, 0, 0, 0},
      {"JSON + gzip 6 (sentry-style)", 6, true, true, 0, 0, 0, 0},
  };
  const size_t nv = sizeof v / sizeof v[0];
  const double samples = EVENTS * SAMPLES_PER_EVENT;
  printf("%-34s %9s %9s %14s %10s %10s %8s %8s\n", "variant", "cpu ms", "wall ms", "samples/s/core",
         "raw B", "sent B", "raw B/s", "sent B/s");
  for (size_t i = 0; i < nv; i++) {
    if (measure(&v[i], evs, runs) != 0) {
      fprintf(stderr, "encode_bench: %s failed\n", v[i].label);
      return 1;
    }
    printf("%-34s %9.3f %9.3f %14.0f %10zu %10zu %8.2f %8.2f\n", v[i].label, v[i].cpu_med / 1e6,
           v[i].wall_med / 1e6, samples / (v[i].cpu_med / 1e9), v[i].raw, v[i].sent,
           v[i].raw / samples, v[i].sent / samples);
  }
  const variant_t *pb = &v[0], *js = &v[nv - 1];

  /* The collector's side, for reference: decode of the default payload. */
  {
    perf__batch_resource_t res = {0};
    perf__batch_builder_t *b = NULL;
    uint8_t *out = NULL;
    size_t len = 0;
    if (perf__batch_builder_new(&res, NULL, &b) == 0) {
      for (int e = 0; e < EVENTS; e++)
        perf__event_encode(g_encoder, b, evs[e]);
      perf__batch_finish(b, NULL, &out, &len, NULL);
    }
    int64_t *cpu = calloc((size_t)runs, sizeof *cpu);
    for (int i = 0; out && i < WARMUP_RUNS + runs; i++) {
      int64_t c0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
      Perf__V1__Batch *bt = NULL;
      if (perf__batch_decode(out, len, 64u << 20, &bt) == 0)
        perf__v1__batch__free_unpacked(bt, NULL);
      if (i >= WARMUP_RUNS) cpu[i - WARMUP_RUNS] = clock_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
    }
    if (out) {
      int64_t med = median(cpu, (size_t)runs);
      printf("%-34s %9.3f %9s %14.0f\n", "decode (zstd + protobuf-c + checks)", med / 1e6, "",
             samples / (med / 1e9));
      Perf__V1__Batch *bt = NULL;
      if (perf__batch_decode(out, len, 64u << 20, &bt) == 0) {
        print_breakdown(bt);
        perf__v1__batch__free_unpacked(bt, NULL);
      }
    }
    free(cpu);
    free(out);
    perf__batch_free(b);
  }

  double rate = samples / (pb->cpu_med / 1e9), ratio = (double)pb->sent / (double)js->sent;
  printf("\nratio: sent bytes, protobuf + zstd 3 / JSON + gzip 6: %.4f (%.1fx smaller); "
         "encode time, JSON / protobuf: %.1fx\n",
         ratio, 1 / ratio, (double)js->cpu_med / (double)pb->cpu_med);
  printf("target: encode + compress >= 500k samples/s per core: %.0f %s\n", rate,
         rate >= 500000 ? "PASS" : "MISS");
  printf("target: compressed bytes <= 0.5x JSON + gzip: %.4f %s\n", ratio,
         ratio <= 0.5 ? "PASS" : "MISS");

  for (int e = 0; e < EVENTS; e++)
    perf__event_free(evs[e]);
  free(evs);
  perf__modules_release(mods);
  return 0;
}
