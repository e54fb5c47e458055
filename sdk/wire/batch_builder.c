/*
 * batch_builder.c - the batch builder's lifecycle, its events and the
 * finished batch (see batch.h). The tables live in batch_intern.c. Runs on
 * the thread that owns the builder (the writer).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "sdk/base/clock.h"
#include "sdk/wire/batch_internal.h"

#if defined(__x86_64__)
#if defined(__aarch64__)
#define BATCH_ARCH "aarch64"
#else
#define BATCH_ARCH "x86_64"
#endif
#elif defined(__aarch64__)
#define BATCH_ARCH "aarch64"
#else
#define BATCH_ARCH "unknown"
#endif

#define DROPS_MAX_BYTES 55 /* DropCounters: 5 fields of 1 tag + 10 varint bytes */

static int build_resource(perf__batch_builder_t *b, const perf__batch_resource_t *res);
static char *own_string(perf__batch_builder_t *b, const char *s);
static int build_event(perf__batch_builder_t *b, const perf__batch_event_t *ev, Perf__V1__Event *e);
static int build_threads(perf__batch_builder_t *b, const perf__batch_event_t *ev,
                         Perf__V1__Event *e);
static int build_counts(perf__batch_builder_t *b, const perf__batch_event_t *ev,
                        Perf__V1__Event *e);
static int build_samples(const perf__batch_event_t *ev, Perf__V1__Event *e);
static int build_states(perf__batch_builder_t *b, const perf__batch_event_t *ev,
                        Perf__V1__Event *e);
/* What counts are ranked by: their CPU time (a profile's; NULL: none),
   then their samples. */
typedef struct {
  const perf__batch_count_t *counts;
  const uint64_t *weights_ns;
} counts_order_t;
static int compare_counts(const void *a, const void *b, void *by);
static int64_t us_floor(int64_t ns);
static void free_event(Perf__V1__Event *e);
static void free_events(perf__batch_builder_t *b);
static int random_id(uint8_t id[PERF__BATCH_ID_BYTES]);
static int pack_batch(perf__batch_builder_t *b, Perf__V1__Batch *batch, uint8_t **raw,
                      size_t *size);
static int compress_payload(perf__batch_builder_t *b, uint8_t *raw, size_t size, uint8_t **out,
                            size_t *len);

void perf__batch_options_init(perf__batch_options_t *opts) {
  opts->zstd_level = PERF__BATCH_DEFAULT_ZSTD_LEVEL;
  opts->symbolize = true;
  opts->max_bytes = PERF__BATCH_DEFAULT_MAX_BYTES;
  opts->uncompressed = false;
}

int perf__batch_builder_new(const perf__batch_resource_t *res, const perf__batch_options_t *opts,
                            perf__batch_builder_t **out) {
  if (!res || !out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  perf__batch_options_t o;
  perf__batch_options_init(&o);
  if (opts) o = *opts;
  if (o.zstd_level < 1 || o.zstd_level > 19 || o.max_bytes < PERF__BATCH_MIN_MAX_BYTES ||
      o.max_bytes > PERF__BATCH_MAX_MAX_BYTES || res->tag_count > PERF_MAX_TAGS)
    return PERF_E_INVALID_ARGUMENT;
  perf__batch_builder_t *b = calloc(1, sizeof *b);
  if (!b) return PERF_E_NO_MEMORY;
  b->opts = o;
  b->generation = perf__batch_new_generation();
  int err = build_resource(b, res);
  if (!err) {
    b->header_bytes = perf__batch_field_bytes(PERF__BATCH_ID_BYTES) + 1 + 10 /* sequence */ + 1 +
                      10 /* created_unix_nanos */ + perf__batch_field_bytes(strlen(PERF_SDK_NAME)) +
                      perf__batch_field_bytes(strlen(PERF_SDK_VERSION)) +
                      perf__batch_field_bytes(perf__v1__resource__get_packed_size(&b->resource)) +
                      perf__batch_field_bytes(DROPS_MAX_BYTES) + 2 /* symbolized */;
    b->bytes = b->header_bytes;
    uint32_t empty;
    err = perf__batch_intern_string(b, "", 0, &empty); /* strings[0], for the builder's life */
    if (err == PERF__BATCH_FULL) err = PERF_E_INVALID_ARGUMENT;
  }
  if (err) {
    perf__batch_free(b);
    return err;
  }
  *out = b;
  return PERF_OK;
}

void perf__batch_free(perf__batch_builder_t *b) {
  if (!b) return;
  free_events(b);
  perf__batch_free_tables(b);
  free(b->events);
  free(b->counts);
  for (size_t i = 0; i < b->owned_count; i++)
    free(b->owned[i]);
  free(b);
}

void perf__batch_begin_event(perf__batch_builder_t *b) {
  b->event_mark = perf__batch_take_mark(b);
}

int perf__batch_abort_event(perf__batch_builder_t *b, int err) {
  perf__batch_rollback(b, &b->event_mark);
  if (err == PERF__BATCH_FULL) return b->n_events == 0 ? PERF_E_TRUNCATED : PERF_E_NO_MEMORY;
  return err ? err : PERF_E_SYSTEM;
}

int perf__batch_add_event(perf__batch_builder_t *b, const perf__batch_event_t *ev) {
  if (!b || !ev) return PERF_E_INVALID_ARGUMENT;
  Perf__V1__Event e = PERF__V1__EVENT__INIT;
  int err = build_event(b, ev, &e);
  size_t add = 0;
  if (!err) {
    add = perf__batch_field_bytes(perf__v1__event__get_packed_size(&e));
    if (b->bytes + add > b->opts.max_bytes) err = PERF__BATCH_FULL;
  }
  if (!err)
    err = perf__batch_grow((void **)&b->events, &b->events_cap, b->n_events + 1, sizeof *b->events);
  if (err) {
    free_event(&e);
    return perf__batch_abort_event(b, err);
  }
  b->events[b->n_events++] = e;
  b->bytes += add;
  if (b->n_events == 1 && !b->has_loop_stats) b->opened_ns = perf__now_ns();
  return PERF_OK;
}

uint64_t perf__batch_generation(const perf__batch_builder_t *b) {
  return b->generation;
}

bool perf__batch_symbolized(const perf__batch_builder_t *b) {
  return b->opts.symbolize;
}

size_t perf__batch_event_count(const perf__batch_builder_t *b) {
  return b ? b->n_events : 0;
}

size_t perf__batch_encoded_size(const perf__batch_builder_t *b) {
  return b ? b->bytes : 0;
}

int64_t perf__batch_opened_ns(const perf__batch_builder_t *b) {
  return perf__batch_has_content(b) ? b->opened_ns : 0;
}

int perf__batch_finish(perf__batch_builder_t *b, const perf__batch_drops_t *drops, uint8_t **out,
                       size_t *len, uint8_t batch_id[PERF__BATCH_ID_BYTES]) {
  uint8_t id[PERF__BATCH_ID_BYTES];
  if (perf__batch_new_id(id) != 0) return PERF_E_SYSTEM;
  int err = perf__batch_finish_as(b, drops, id, out, len);
  if (!err && batch_id) memcpy(batch_id, id, sizeof id);
  return err;
}

int perf__batch_new_id(uint8_t id[PERF__BATCH_ID_BYTES]) {
  return random_id(id) == 0 ? PERF_OK : PERF_E_SYSTEM;
}

int perf__batch_finish_as(perf__batch_builder_t *b, const perf__batch_drops_t *drops,
                          const uint8_t batch_id[PERF__BATCH_ID_BYTES], uint8_t **out,
                          size_t *len) {
  if (!b || !out || !len || !batch_id) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  *len = 0;
  uint8_t id[PERF__BATCH_ID_BYTES];
  memcpy(id, batch_id, sizeof id);
  Perf__V1__DropCounters dc = PERF__V1__DROP_COUNTERS__INIT;
  if (drops) {
    dc.rate_limited = drops->rate_limited;
    dc.queue_full = drops->queue_full;
    dc.sink_failed = drops->sink_failed;
    dc.spool_quota = drops->spool_quota;
    dc.oversized = drops->oversized;
  }
  Perf__V1__Batch batch = PERF__V1__BATCH__INIT;
  batch.batch_id.len = sizeof id;
  batch.batch_id.data = id;
  batch.sequence = b->sequence + 1;
  batch.created_unix_nanos = perf__wall_ns();
  batch.sdk_name = (char *)PERF_SDK_NAME;
  batch.sdk_version = (char *)PERF_SDK_VERSION;
  batch.resource = &b->resource;
  batch.drops = &dc;
  batch.symbolized = b->opts.symbolize;
  Perf__V1__LoopStats ls = PERF__V1__LOOP_STATS__INIT;
  Perf__V1__LoopStats loops[PERF__BATCH_MAX_LOOPS], *loop_ptrs[PERF__BATCH_MAX_LOOPS];
  if (b->has_loop_stats) {
    ls.watched_nanos = b->loop_stats.total.watched_ns;
    ls.busy_nanos = b->loop_stats.total.busy_ns;
    ls.n_busy_units_by_bucket = PERF__LOOP_BUCKETS;
    ls.busy_units_by_bucket = b->loop_stats.total.units;
    batch.loop_stats = &ls;
    for (size_t i = 0; i < b->loop_stats.n_loops; i++) {
      perf__batch_named_loop_t *l = &b->loop_stats.loops[i];
      loops[i] = (Perf__V1__LoopStats)PERF__V1__LOOP_STATS__INIT;
      loops[i].watched_nanos = l->stats.watched_ns;
      loops[i].busy_nanos = l->stats.busy_ns;
      loops[i].n_busy_units_by_bucket = PERF__LOOP_BUCKETS;
      loops[i].busy_units_by_bucket = l->stats.units;
      loops[i].loop = l->name;
      loop_ptrs[i] = &loops[i];
    }
    batch.n_loops = b->loop_stats.n_loops;
    batch.loops = loop_ptrs;
  }
  uint8_t *raw = NULL;
  size_t size = 0;
  int err = pack_batch(b, &batch, &raw, &size);
  if (!err) err = compress_payload(b, raw, size, out, len);
  if (err) return err;
  b->sequence++;
  perf__batch_reset(b);
  return PERF_OK;
}

void perf__batch_reset(perf__batch_builder_t *b) {
  if (!b) return;
  free_events(b);
  perf__batch_clear_tables(b);
  b->has_loop_stats = false;
  memset(&b->loop_stats, 0, sizeof b->loop_stats);
}

/* ------------------------------------------------------------------------ */

static int build_resource(perf__batch_builder_t *b, const perf__batch_resource_t *res) {
  Perf__V1__Resource *r = &b->resource;
  perf__v1__resource__init(r);
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  if (!(r->app_name = own_string(b, res->app_name)) ||
      !(r->app_version = own_string(b, res->app_version)) ||
      !(r->environment = own_string(b, res->environment)) || !(r->host = own_string(b, host)))
    return PERF_E_NO_MEMORY;
  for (size_t i = 0; i < res->tag_count; i++) {
    perf__v1__key_value__init(&b->tags[i]);
    if (!(b->tags[i].key = own_string(b, res->tags[i].key)) ||
        !(b->tags[i].value = own_string(b, res->tags[i].value)))
      return PERF_E_NO_MEMORY;
    b->tag_ptrs[i] = &b->tags[i];
  }
  r->n_tags = res->tag_count;
  r->tags = res->tag_count ? b->tag_ptrs : NULL;
  r->pid = (uint32_t)getpid();
  r->os = (char *)"linux";
  r->arch = (char *)BATCH_ARCH;
  return PERF_OK;
}

/* A copy owned by the builder ("" for NULL); NULL when memory ran out. */
static char *own_string(perf__batch_builder_t *b, const char *s) {
  if (b->owned_count == sizeof b->owned / sizeof b->owned[0]) return NULL;
  char *c = strdup(s ? s : "");
  if (c) b->owned[b->owned_count++] = c;
  return c;
}

static int build_event(perf__batch_builder_t *b, const perf__batch_event_t *ev,
                       Perf__V1__Event *e) {
  e->kind = ev->kind;
  e->start_unix_nanos = ev->start_unix_ns;
  e->duration_nanos = ev->duration_ns;
  e->tid = ev->tid;
  e->cpu_percent = ev->cpu_percent;
  e->samples_dropped = ev->samples_dropped;
  if (ev->reason && ev->reason[0] && !(e->reason = strdup(ev->reason))) return PERF_E_NO_MEMORY;
  if (ev->label && ev->label[0] && !(e->label = strdup(ev->label))) return PERF_E_NO_MEMORY;
  if (ev->loop && ev->loop[0] && !(e->loop = strdup(ev->loop))) return PERF_E_NO_MEMORY;
  int err = build_threads(b, ev, e);
  if (!err) err = build_counts(b, ev, e);
  if (!err) err = build_samples(ev, e);
  if (!err) err = build_states(b, ev, e);
  return err;
}

static int build_threads(perf__batch_builder_t *b, const perf__batch_event_t *ev,
                         Perf__V1__Event *e) {
  size_t n = ev->thread_count;
  if (!n) return PERF_OK;
  /* One block: the pointers, then the messages. */
  void *block = malloc(n * (sizeof(Perf__V1__Thread *) + sizeof(Perf__V1__Thread)));
  if (!block) return PERF_E_NO_MEMORY;
  e->threads = block;
  e->n_threads = n;
  Perf__V1__Thread *t = (Perf__V1__Thread *)(e->threads + n);
  for (size_t i = 0; i < n; i++) {
    perf__v1__thread__init(&t[i]);
    e->threads[i] = &t[i];
    const perf__batch_thread_t *src = &ev->threads[i];
    t[i].tid = src->tid;
    t[i].cpu_percent = src->cpu_percent;
    int err = perf__batch_intern_string(b, src->name ? src->name : "", src->name_len, &t[i].name);
    if (err) return err;
  }
  return PERF_OK;
}

/* The event's stack_counts, most CPU time first (a profile's), then most
   samples, and its dominant stack. */
static int build_counts(perf__batch_builder_t *b, const perf__batch_event_t *ev,
                        Perf__V1__Event *e) {
  size_t n = ev->count_count;
  if (!n) return PERF_OK;
  if (perf__batch_grow((void **)&b->counts, &b->counts_cap, n, sizeof *b->counts))
    return PERF_E_NO_MEMORY;
  void *block = malloc(n * (sizeof(Perf__V1__StackCount *) + sizeof(Perf__V1__StackCount)));
  if (!block) return PERF_E_NO_MEMORY;
  e->stack_counts = block;
  e->n_stack_counts = n;
  /* Sorted through their position: ties keep the order given. */
  memcpy(b->counts, ev->counts, n * sizeof *b->counts);
  size_t *order = malloc(n * sizeof *order);
  if (!order) return PERF_E_NO_MEMORY;
  for (size_t i = 0; i < n; i++)
    order[i] = i;
  counts_order_t by = {b->counts, ev->count_weights_ns};
  qsort_r(order, n, sizeof *order, compare_counts, &by);
  Perf__V1__StackCount *c = (Perf__V1__StackCount *)(e->stack_counts + n);
  for (size_t i = 0; i < n; i++) {
    const perf__batch_count_t *src = &b->counts[order[i]];
    perf__v1__stack_count__init(&c[i]);
    c[i].stack = src->stack;
    c[i].tid = src->tid;
    c[i].samples = src->samples;
    if (ev->count_weights_ns) c[i].weight_micros = (ev->count_weights_ns[order[i]] + 500) / 1000;
    if (ev->count_states) c[i].state = (Perf__V1__SampleState)ev->count_states[order[i]];
    e->stack_counts[i] = &c[i];
  }
  free(order);
  e->dominant_stack = c[0].stack;
  return PERF_OK;
}

static int build_samples(const perf__batch_event_t *ev, Perf__V1__Event *e) {
  size_t n = ev->sample_count, failed = 0;
  bool other_tid = false;
  for (size_t i = 0; i < n; i++) {
    failed += ev->samples[i].stack == 0;
    other_tid = other_tid || ev->samples[i].tid != ev->tid;
  }
  if (!n) return PERF_OK;
  if (!(e->sample_offsets_micros = malloc(n * sizeof *e->sample_offsets_micros)) ||
      !(e->sample_stacks = malloc(n * sizeof *e->sample_stacks)) ||
      (other_tid && !(e->sample_tids = malloc(n * sizeof *e->sample_tids))) ||
      (failed && !(e->sample_errors = malloc(failed * sizeof *e->sample_errors))) ||
      (ev->weighted && !(e->sample_weights_micros = malloc(n * sizeof *e->sample_weights_micros))))
    return PERF_E_NO_MEMORY;
  e->n_sample_weights_micros = ev->weighted ? n : 0;
  e->n_sample_offsets_micros = e->n_sample_stacks = n;
  e->n_sample_tids = other_tid ? n : 0;
  /* Whole microseconds, each time truncated first: the running sum has no
     drift. */
  int64_t prev = us_floor(ev->start_mono_ns);
  for (size_t i = 0; i < n; i++) {
    const perf__batch_sample_t *s = &ev->samples[i];
    int64_t us = us_floor(s->mono_ns);
    e->sample_offsets_micros[i] = us - prev;
    prev = us;
    e->sample_stacks[i] = s->stack;
    if (other_tid) e->sample_tids[i] = s->tid;
    if (!s->stack) e->sample_errors[e->n_sample_errors++] = s->error ? s->error : PERF_E_SYSTEM;
    if (ev->weighted) e->sample_weights_micros[i] = (s->weight_ns + 500) / 1000; /* nearest */
  }
  return PERF_OK;
}

/* The per-sample state columns, when any sample's state is known. */
static int build_states(perf__batch_builder_t *b, const perf__batch_event_t *ev,
                        Perf__V1__Event *e) {
  size_t n = ev->sample_count;
  bool any = false;
  for (size_t i = 0; i < n && !any; i++)
    any = ev->samples[i].state != 0;
  if (!any) return PERF_OK;
  if (!(e->sample_states = malloc(n * sizeof *e->sample_states)) ||
      !(e->sample_syscalls = malloc(n * sizeof *e->sample_syscalls)) ||
      !(e->sample_fds = malloc(n * sizeof *e->sample_fds)))
    return PERF_E_NO_MEMORY;
  e->n_sample_states = e->n_sample_syscalls = e->n_sample_fds = n;
  for (size_t i = 0; i < n; i++) {
    const perf__batch_sample_t *s = &ev->samples[i];
    e->sample_states[i] = (Perf__V1__SampleState)s->state;
    e->sample_fds[i] = (Perf__V1__FdKind)s->fd_kind;
    e->sample_syscalls[i] = 0;
    const char *call = s->syscall;
    if (call && call[0]) {
      int err = perf__batch_intern_string(b, call, strlen(call), &e->sample_syscalls[i]);
      if (err) return err;
    }
  }
  return PERF_OK;
}

static int compare_counts(const void *a, const void *b, void *by) {
  const perf__batch_count_t *c = ((const counts_order_t *)by)->counts;
  const uint64_t *w = ((const counts_order_t *)by)->weights_ns;
  size_t i = *(const size_t *)a, j = *(const size_t *)b;
  if (w && w[i] != w[j]) return w[i] > w[j] ? -1 : 1;
  if (c[i].samples != c[j].samples) return c[i].samples > c[j].samples ? -1 : 1;
  return (i > j) - (i < j);
}

/* Microseconds, rounded towards minus infinity. */
static int64_t us_floor(int64_t ns) {
  return ns >= 0 ? ns / 1000 : -((-(ns + 1)) / 1000) - 1;
}

static void free_event(Perf__V1__Event *e) {
  if (e->reason != (char *)protobuf_c_empty_string) free(e->reason);
  if (e->label != (char *)protobuf_c_empty_string) free(e->label);
  if (e->loop != (char *)protobuf_c_empty_string) free(e->loop);
  free(e->threads);
  free(e->stack_counts);
  free(e->sample_offsets_micros);
  free(e->sample_tids);
  free(e->sample_stacks);
  free(e->sample_errors);
  free(e->sample_weights_micros);
  free(e->sample_states);
  free(e->sample_syscalls);
  free(e->sample_fds);
}

static void free_events(perf__batch_builder_t *b) {
  for (size_t i = 0; i < b->n_events; i++)
    free_event(&b->events[i]);
  b->n_events = 0;
  b->opened_ns = 0;
}

static int random_id(uint8_t id[PERF__BATCH_ID_BYTES]) {
  size_t got = 0;
  while (got < PERF__BATCH_ID_BYTES) {
    ssize_t n = getrandom(id + got, PERF__BATCH_ID_BYTES - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    got += (size_t)n;
  }
  return 0;
}

/* The repeated fields want arrays of pointers: one block holds them all
   (frames' lines included); the Stack messages are made here, pointing
   into the pool. */
static int pack_batch(perf__batch_builder_t *b, Perf__V1__Batch *batch, uint8_t **raw,
                      size_t *size) {
  size_t nptr = b->n_strings + b->n_modules + b->n_functions + b->n_frames + b->n_lines +
                b->n_stacks + b->n_events;
  void **ptrs = malloc((nptr ? nptr : 1) * sizeof *ptrs);
  Perf__V1__Stack *stacks = malloc((b->n_stacks ? b->n_stacks : 1) * sizeof *stacks);
  if (!ptrs || !stacks) {
    free(ptrs);
    free(stacks);
    return PERF_E_NO_MEMORY;
  }
  void **p = ptrs;
  batch->n_strings = b->n_strings;
  batch->strings = (char **)p;
  for (size_t i = 0; i < b->n_strings; i++)
    *p++ = b->strings[i].text;
  batch->n_modules = b->n_modules;
  batch->modules = (Perf__V1__Module **)p;
  for (size_t i = 0; i < b->n_modules; i++)
    *p++ = &b->modules[i];
  batch->n_functions = b->n_functions;
  batch->functions = (Perf__V1__Function **)p;
  for (size_t i = 0; i < b->n_functions; i++)
    *p++ = &b->functions[i];
  Perf__V1__Line **lines = (Perf__V1__Line **)p;
  for (size_t i = 0; i < b->n_lines; i++)
    *p++ = &b->line_pool[i];
  batch->n_frames = b->n_frames;
  batch->frames = (Perf__V1__Frame **)p;
  for (size_t i = 0; i < b->n_frames; i++) {
    b->frames[i].n_lines = b->frame_recs[i].count;
    b->frames[i].lines = b->frame_recs[i].count ? lines + b->frame_recs[i].first : NULL;
    *p++ = &b->frames[i];
  }
  batch->n_stacks = b->n_stacks;
  batch->stacks = (Perf__V1__Stack **)p;
  for (size_t i = 0; i < b->n_stacks; i++) {
    perf__v1__stack__init(&stacks[i]);
    stacks[i].n_frames = b->stacks[i].depth;
    stacks[i].frames = b->pool + b->stacks[i].first;
    stacks[i].end = b->stacks[i].end;
    *p++ = &stacks[i];
  }
  batch->n_events = b->n_events;
  batch->events = (Perf__V1__Event **)p;
  for (size_t i = 0; i < b->n_events; i++)
    *p++ = &b->events[i];
  int err = PERF_OK;
  *size = perf__v1__batch__get_packed_size(batch);
  if (*size > b->bytes) err = PERF_E_SYSTEM; /* the bound is an invariant: never expected */
  if (!err && !(*raw = malloc(*size ? *size : 1))) err = PERF_E_NO_MEMORY;
  if (!err) perf__v1__batch__pack(batch, *raw);
  for (size_t i = 0; i < b->n_frames; i++) { /* the pointer block is freed */
    b->frames[i].n_lines = 0;
    b->frames[i].lines = NULL;
  }
  free(ptrs);
  free(stacks);
  return err;
}

/* Takes raw (freed here); *out is the zstd frame, or raw itself when the
   builder is uncompressed. */
static int compress_payload(perf__batch_builder_t *b, uint8_t *raw, size_t size, uint8_t **out,
                            size_t *len) {
  if (b->opts.uncompressed) {
    *out = raw;
    *len = size;
    return PERF_OK;
  }
  size_t cap = ZSTD_compressBound(size);
  uint8_t *z = malloc(cap);
  int err = z ? PERF_OK : PERF_E_NO_MEMORY;
  size_t zlen = 0;
  /* A context per batch: its tables (sized to the batch) go back when it is
     made, and no zstd object lives between batches (an idle SDK unloads
     libzstd: sdk/base/lazy_lib.h). */
  ZSTD_CCtx *cctx = err ? NULL : ZSTD_createCCtx();
  if (!err && !cctx) err = PERF_E_NO_MEMORY;
  if (!err &&
      (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, b->opts.zstd_level)) ||
       ZSTD_isError(ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1))))
    err = PERF_E_SYSTEM;
  if (!err) {
    zlen = ZSTD_compress2(cctx, z, cap, raw, size);
    if (ZSTD_isError(zlen)) err = PERF_E_SYSTEM;
  }
  ZSTD_freeCCtx(cctx);
  free(raw);
  if (err) {
    free(z);
    return err;
  }
  uint8_t *shrunk = realloc(z, zlen ? zlen : 1);
  *out = shrunk ? shrunk : z;
  *len = zlen;
  return PERF_OK;
}
