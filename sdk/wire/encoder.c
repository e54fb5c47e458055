/*
 * encoder.c - the batch builder and the bounded batch decoder (see
 * encoder.h and proto/perf/v1/perf.proto).
 *
 * Owns the batch's tables while it is being built: strings, modules,
 * functions, frames and stacks, each deduplicated through a hash index, and
 * the encoded events. Runs on the writer thread (one builder, one thread);
 * perf__batch_decode is stateless and runs on any thread.
 *
 * Adding an event is a transaction: the table sizes are marked first, and
 * an event that does not fit (or an allocation that fails) pops every entry
 * added since the mark. The hash indexes chain new entries in front of old
 * ones, so popping the newest entries in reverse order restores them.
 *
 * Two caches make repeated stacks cheap, both valid for one module snapshot
 * (the builder holds a reference to it so its address cannot be reused):
 * pc -> frame index (so a pc is symbolized once per batch) and map module ->
 * batch module index. A rollback or a new batch empties them.
 */
#include "sdk/wire/encoder.h"

#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#include "perf_sdk.h"
#include "sdk/base/clock.h"

#if defined(__x86_64__)
#define ENCODER_ARCH "x86_64"
#elif defined(__aarch64__)
#define ENCODER_ARCH "aarch64"
#else
#define ENCODER_ARCH "unknown"
#endif

#define FULL 1                /* internal: the batch would exceed max_bytes */
#define DROPS_MAX_BYTES 55    /* DropCounters: 5 fields of 1 tag + 10 varint bytes */
#define INDEX_MIN_BUCKETS 64u /* hash index buckets at first use */
#define DECODE_CHUNK (64u << 10)

/* A hash index over a table whose entries are only ever appended or popped
   from the end. heads[] holds entry + 1 (0 = empty bucket); a bucket chains
   its entries newest first. */
typedef struct intern_index_s {
  uint32_t *heads;
  size_t nbuckets;
  uint32_t *next;
  uint64_t *hash;
  size_t count, cap;
} intern_index_t;

typedef struct string_rec_s {
  char *text;
  uint32_t len;
  uint32_t function; /* 1-based function whose name this is, 0 = none */
} string_rec_t;

typedef struct stack_rec_s {
  uint32_t first, depth; /* frame indices in pool[first..first+depth) */
} stack_rec_t;

typedef struct pc_slot_s {
  uint64_t key;   /* pc * 2 + return_address */
  uint32_t frame; /* 1-based */
  uint32_t gen;   /* the slot is empty unless gen == builder's pc_gen */
} pc_slot_t;

typedef struct count_rec_s {
  uint32_t samples, order, stack, tid;
} count_rec_t;

typedef struct mark_s {
  size_t strings, modules, functions, frames, stacks, pool, bytes;
} mark_t;

struct perf__batch_builder_s {
  perf__batch_options_t opts;
  Perf__V1__Resource resource;
  Perf__V1__KeyValue tags[PERF_MAX_TAGS];
  Perf__V1__KeyValue *tag_ptrs[PERF_MAX_TAGS];
  char *owned[3 + 2 * PERF_MAX_TAGS + 1]; /* resource strings */
  size_t owned_count;
  size_t header_bytes; /* batch fields outside the tables, upper bound */
  uint64_t sequence;   /* of the last finished batch */
  ZSTD_CCtx *cctx;

  string_rec_t *strings;
  size_t n_strings, strings_cap;
  intern_index_t string_ix;
  Perf__V1__Module *modules;
  size_t n_modules, modules_cap;
  Perf__V1__Function *functions;
  size_t n_functions, functions_cap;
  Perf__V1__Frame *frames;
  size_t n_frames, frames_cap;
  intern_index_t frame_ix;
  stack_rec_t *stacks;
  size_t n_stacks, stacks_cap;
  intern_index_t stack_ix;
  uint32_t *pool;
  size_t pool_len, pool_cap;
  Perf__V1__Event *events;
  size_t n_events, events_cap;
  size_t bytes; /* serialized size bound of the batch as it stands */
  int64_t opened_ns;

  perf__modules_t *cache_mods; /* a reference, or NULL */
  uint32_t *module_cache;      /* per map module: 1-based batch module, 0 unknown */
  size_t module_cache_len;
  pc_slot_t *pc_cache;
  size_t pc_cap, pc_count;
  uint32_t pc_gen;

  uint32_t scratch[PERF__EVENT_MAX_DEPTH];
  uint32_t *stack_map; /* event stack -> 1-based batch stack */
  count_rec_t *counts;
  size_t stack_map_cap, counts_cap;
};

typedef struct frame_key_s {
  uint32_t module, function;
  uint64_t address, function_offset, runtime_address;
} frame_key_t;

typedef struct stack_key_s {
  const uint32_t *frames;
  uint32_t depth;
} stack_key_t;

typedef struct string_key_s {
  const char *text;
  size_t len;
} string_key_t;

typedef bool (*index_eq_fn)(const perf__batch_builder_t *b, uint32_t entry, const void *key);

static int build_resource(perf__batch_builder_t *b, const perf__config_t *cfg);
static char *own_string(perf__batch_builder_t *b, const char *s);
static size_t varint_size(uint64_t v);
static size_t field_bytes(size_t payload);
static int grow(void **items, size_t *cap, size_t need, size_t item_size);
static uint64_t mix64(uint64_t h);
static int index_reserve(intern_index_t *ix, size_t need);
static int64_t index_find(const intern_index_t *ix, uint64_t h, index_eq_fn eq,
                          const perf__batch_builder_t *b, const void *key);
static int index_add(intern_index_t *ix, uint64_t h);
static void index_pop(intern_index_t *ix);
static void index_clear(intern_index_t *ix);
static void index_free(intern_index_t *ix);
static bool string_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key);
static bool frame_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key);
static bool stack_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key);
static int add_bytes(perf__batch_builder_t *b, size_t n);
static int intern_string(perf__batch_builder_t *b, const char *text, size_t len, uint32_t *out);
static int intern_function(perf__batch_builder_t *b, const char *name, size_t len, uint32_t *out);
static int intern_frame(perf__batch_builder_t *b, const frame_key_t *k, uint32_t *out);
static int intern_stack(perf__batch_builder_t *b, const uint32_t *frames, uint32_t depth,
                        uint32_t *out);
static int intern_module(perf__batch_builder_t *b, const char *path, const uint8_t *build_id,
                         size_t build_id_len, bool only_basename, uint64_t bias, uint64_t start,
                         uint64_t end, uint32_t *out);
static int use_snapshot(perf__batch_builder_t *b, perf__modules_t *mods);
static void invalidate_caches(perf__batch_builder_t *b);
static int live_frame(perf__batch_builder_t *b, perf__modules_t *mods, uintptr_t pc, bool ret,
                      uint32_t *out);
static int text_frame(perf__batch_builder_t *b, const char *line, size_t len, uint32_t *out);
static int build_common(perf__batch_builder_t *b, const perf__event_t *ev, Perf__V1__Event *e);
static int build_live(perf__batch_builder_t *b, const perf__event_t *ev, Perf__V1__Event *e);
static int64_t us_floor(int64_t ns);
static int build_text(perf__batch_builder_t *b, const perf__event_t *ev, Perf__V1__Event *e);
static bool text_header(const char *p, size_t len, uint32_t *samples, uint32_t *tid);
static int end_text_stack(perf__batch_builder_t *b, size_t n, uint32_t depth, uint32_t samples,
                          uint32_t tid);
static int set_counts(perf__batch_builder_t *b, Perf__V1__Event *e, size_t n);
static int compare_counts(const void *a, const void *b);
static void free_event(Perf__V1__Event *e);
static mark_t take_mark(const perf__batch_builder_t *b);
static void rollback(perf__batch_builder_t *b, const mark_t *m);
static void clear_tables(perf__batch_builder_t *b);
static int validate_batch(const Perf__V1__Batch *bt);

void perf__batch_options_init(perf__batch_options_t *opts) {
  opts->zstd_level = PERF__BATCH_DEFAULT_ZSTD_LEVEL;
  opts->symbolize = true;
  opts->max_bytes = PERF__BATCH_DEFAULT_MAX_BYTES;
  opts->uncompressed = false;
}

int perf__batch_builder_new(const perf__config_t *cfg, const perf__batch_options_t *opts,
                            perf__batch_builder_t **out) {
  if (!cfg || !out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  perf__batch_options_t o;
  perf__batch_options_init(&o);
  if (opts) o = *opts;
  if (o.zstd_level < 1 || o.zstd_level > 19 || o.max_bytes < PERF__BATCH_MIN_MAX_BYTES ||
      o.max_bytes > PERF__BATCH_MAX_MAX_BYTES)
    return PERF_E_INVALID_ARGUMENT;
  perf__batch_builder_t *b = calloc(1, sizeof *b);
  if (!b) return PERF_E_NO_MEMORY;
  b->opts = o;
  b->pc_gen = 1; /* calloc'd slots (gen 0) are empty */
  int err = build_resource(b, cfg);
  if (!err && !(b->cctx = ZSTD_createCCtx())) err = PERF_E_NO_MEMORY;
  if (!err &&
      (ZSTD_isError(ZSTD_CCtx_setParameter(b->cctx, ZSTD_c_compressionLevel, o.zstd_level)) ||
       ZSTD_isError(ZSTD_CCtx_setParameter(b->cctx, ZSTD_c_checksumFlag, 1))))
    err = PERF_E_SYSTEM;
  if (!err) {
    b->header_bytes = field_bytes(PERF__BATCH_ID_BYTES) + 1 + 10 /* sequence */ + 1 +
                      10 /* created_unix_nanos */ + field_bytes(strlen(PERF_SDK_NAME)) +
                      field_bytes(strlen(PERF_SDK_VERSION)) +
                      field_bytes(perf__v1__resource__get_packed_size(&b->resource)) +
                      field_bytes(DROPS_MAX_BYTES) + 2 /* symbolized */;
    b->bytes = b->header_bytes;
    uint32_t empty;
    err = intern_string(b, "", 0, &empty); /* strings[0], kept for the builder's life */
    if (err == FULL) err = PERF_E_INVALID_ARGUMENT;
  }
  if (err) {
    perf__batch_free(b);
    return err;
  }
  *out = b;
  return PERF_OK;
}

int perf__batch_add_event(perf__batch_builder_t *b, const perf__event_t *ev) {
  if (!b || !ev) return PERF_E_INVALID_ARGUMENT;
  mark_t m = take_mark(b);
  Perf__V1__Event e = PERF__V1__EVENT__INIT;
  int err = ev->stacks_text ? build_text(b, ev, &e) : build_live(b, ev, &e);
  size_t add = 0;
  if (!err) {
    add = field_bytes(perf__v1__event__get_packed_size(&e));
    if (b->bytes + add > b->opts.max_bytes) err = FULL;
  }
  if (!err) err = grow((void **)&b->events, &b->events_cap, b->n_events + 1, sizeof *b->events);
  if (err) {
    free_event(&e);
    rollback(b, &m);
    if (err == FULL) return b->n_events == 0 ? PERF_E_TRUNCATED : PERF_E_NO_MEMORY;
    return err;
  }
  b->events[b->n_events++] = e;
  b->bytes += add;
  if (b->n_events == 1) b->opened_ns = perf__now_ns();
  return PERF_OK;
}

size_t perf__batch_event_count(const perf__batch_builder_t *b) {
  return b ? b->n_events : 0;
}

size_t perf__batch_encoded_size(const perf__batch_builder_t *b) {
  return b ? b->bytes : 0;
}

int64_t perf__batch_opened_ns(const perf__batch_builder_t *b) {
  return b && b->n_events ? b->opened_ns : 0;
}

int perf__batch_finish(perf__batch_builder_t *b, const perf__batch_drops_t *drops, uint8_t **out,
                       size_t *len, uint8_t batch_id[PERF__BATCH_ID_BYTES]) {
  if (!b || !out || !len) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  *len = 0;
  uint8_t id[PERF__BATCH_ID_BYTES];
  size_t got = 0;
  while (got < sizeof id) {
    ssize_t n = getrandom(id + got, sizeof id - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return PERF_E_SYSTEM;
    got += (size_t)n;
  }
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

  /* The repeated fields want arrays of pointers: one block holds them all;
     the Stack messages are made here, pointing into the pool. */
  size_t nptr =
      b->n_strings + b->n_modules + b->n_functions + b->n_frames + b->n_stacks + b->n_events;
  void **ptrs = malloc((nptr ? nptr : 1) * sizeof *ptrs);
  Perf__V1__Stack *stacks = malloc((b->n_stacks ? b->n_stacks : 1) * sizeof *stacks);
  if (!ptrs || !stacks) {
    free(ptrs);
    free(stacks);
    return PERF_E_NO_MEMORY;
  }
  void **p = ptrs;
  batch.n_strings = b->n_strings;
  batch.strings = (char **)p;
  for (size_t i = 0; i < b->n_strings; i++)
    *p++ = b->strings[i].text;
  batch.n_modules = b->n_modules;
  batch.modules = (Perf__V1__Module **)p;
  for (size_t i = 0; i < b->n_modules; i++)
    *p++ = &b->modules[i];
  batch.n_functions = b->n_functions;
  batch.functions = (Perf__V1__Function **)p;
  for (size_t i = 0; i < b->n_functions; i++)
    *p++ = &b->functions[i];
  batch.n_frames = b->n_frames;
  batch.frames = (Perf__V1__Frame **)p;
  for (size_t i = 0; i < b->n_frames; i++)
    *p++ = &b->frames[i];
  batch.n_stacks = b->n_stacks;
  batch.stacks = (Perf__V1__Stack **)p;
  for (size_t i = 0; i < b->n_stacks; i++) {
    perf__v1__stack__init(&stacks[i]);
    stacks[i].n_frames = b->stacks[i].depth;
    stacks[i].frames = b->pool + b->stacks[i].first;
    *p++ = &stacks[i];
  }
  batch.n_events = b->n_events;
  batch.events = (Perf__V1__Event **)p;
  for (size_t i = 0; i < b->n_events; i++)
    *p++ = &b->events[i];

  int err = PERF_OK;
  size_t size = perf__v1__batch__get_packed_size(&batch);
  uint8_t *raw = NULL, *z = NULL;
  if (size > b->bytes) err = PERF_E_SYSTEM; /* the bound is an invariant: never expected */
  if (!err && !(raw = malloc(size ? size : 1))) err = PERF_E_NO_MEMORY;
  if (!err) perf__v1__batch__pack(&batch, raw);
  free(ptrs);
  free(stacks);
  size_t zlen = size;
  if (!err && b->opts.uncompressed) {
    z = raw;
    raw = NULL;
  } else if (!err) {
    size_t cap = ZSTD_compressBound(size);
    if (!(z = malloc(cap))) err = PERF_E_NO_MEMORY;
    if (!err) {
      ZSTD_CCtx_reset(b->cctx, ZSTD_reset_session_only);
      zlen = ZSTD_compress2(b->cctx, z, cap, raw, size);
      if (ZSTD_isError(zlen)) err = PERF_E_SYSTEM;
    }
    if (!err) {
      uint8_t *shrunk = realloc(z, zlen ? zlen : 1);
      if (shrunk) z = shrunk;
    }
  }
  free(raw);
  if (err) {
    free(z);
    return err;
  }
  *out = z;
  *len = zlen;
  if (batch_id) memcpy(batch_id, id, sizeof id);
  b->sequence++;
  perf__batch_reset(b);
  return PERF_OK;
}

void perf__batch_reset(perf__batch_builder_t *b) {
  if (!b) return;
  clear_tables(b);
  perf__modules_release(b->cache_mods);
  b->cache_mods = NULL;
  invalidate_caches(b);
  b->module_cache_len = 0;
}

void perf__batch_free(perf__batch_builder_t *b) {
  if (!b) return;
  clear_tables(b);
  for (size_t i = 0; i < b->n_strings; i++)
    free(b->strings[i].text);
  free(b->strings);
  index_free(&b->string_ix);
  index_free(&b->frame_ix);
  index_free(&b->stack_ix);
  free(b->modules);
  free(b->functions);
  free(b->frames);
  free(b->stacks);
  free(b->pool);
  free(b->events);
  perf__modules_release(b->cache_mods);
  free(b->module_cache);
  free(b->pc_cache);
  free(b->stack_map);
  free(b->counts);
  for (size_t i = 0; i < b->owned_count; i++)
    free(b->owned[i]);
  ZSTD_freeCCtx(b->cctx);
  free(b);
}

int perf__batch_decode(const uint8_t *data, size_t len, size_t max_decompressed,
                       Perf__V1__Batch **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  if (!data || len == 0 || max_decompressed == 0 || max_decompressed > SIZE_MAX / 2)
    return PERF_E_INVALID_ARGUMENT;
  /* The window a frame may ask for is capped to match the output cap: a
     payload within the cap never needs more (the encoder knows the content
     size and sizes the window to it). */
  int wlog = 10; /* zstd's smallest window */
  while (wlog < 27 && ((size_t)1 << wlog) < max_decompressed)
    wlog++;
  ZSTD_DCtx *d = ZSTD_createDCtx();
  if (!d) return PERF_E_NO_MEMORY;
  int err = ZSTD_isError(ZSTD_DCtx_setParameter(d, ZSTD_d_windowLogMax, wlog)) ? PERF_E_SYSTEM : 0;
  /* One byte past the cap: output reaching it proves the payload too big,
     while a payload of exactly the cap still has room to end its frame. */
  size_t limit = max_decompressed + 1;
  size_t cap = limit < DECODE_CHUNK ? limit : DECODE_CHUNK;
  uint8_t *buf = err ? NULL : malloc(cap);
  if (!err && !buf) err = PERF_E_NO_MEMORY;
  ZSTD_inBuffer in = {data, len, 0};
  size_t pos = 0;
  bool done = false;
  while (!err && !done) {
    if (pos == cap) {
      if (cap == limit) {
        err = PERF_E_TRUNCATED;
        break;
      }
      size_t bigger = cap > limit / 2 ? limit : cap * 2;
      uint8_t *grown = realloc(buf, bigger);
      if (!grown) {
        err = PERF_E_NO_MEMORY;
        break;
      }
      buf = grown;
      cap = bigger;
    }
    ZSTD_outBuffer o = {buf, cap, pos};
    size_t in_before = in.pos;
    size_t r = ZSTD_decompressStream(d, &o, &in);
    if (ZSTD_isError(r)) {
      err = ZSTD_getErrorCode(r) == ZSTD_error_frameParameter_windowTooLarge
                ? PERF_E_TRUNCATED
                : PERF_E_INVALID_ARGUMENT;
      break;
    }
    bool progress = o.pos != pos || in.pos != in_before;
    pos = o.pos;
    if (r == 0)
      done = true;
    else if (!progress && pos < cap)
      err = PERF_E_INVALID_ARGUMENT; /* input ended mid-frame */
  }
  if (!err && pos > max_decompressed) err = PERF_E_TRUNCATED;
  if (!err && in.pos != in.size) err = PERF_E_INVALID_ARGUMENT; /* bytes after the frame */
  ZSTD_freeDCtx(d);
  if (!err) err = perf__batch_decode_uncompressed(buf, pos, out);
  free(buf);
  return err;
}

int perf__batch_decode_uncompressed(const uint8_t *data, size_t len, Perf__V1__Batch **out) {
  if (!out) return PERF_E_INVALID_ARGUMENT;
  *out = NULL;
  if (!data && len) return PERF_E_INVALID_ARGUMENT;
  static const uint8_t empty[1];
  Perf__V1__Batch *bt = perf__v1__batch__unpack(NULL, len, data ? data : empty);
  if (!bt) return PERF_E_INVALID_ARGUMENT;
  if (validate_batch(bt) != 0) {
    perf__v1__batch__free_unpacked(bt, NULL);
    return PERF_E_INVALID_ARGUMENT;
  }
  *out = bt;
  return PERF_OK;
}

/* ------------------------------------------------------------------------ */

static int build_resource(perf__batch_builder_t *b, const perf__config_t *cfg) {
  Perf__V1__Resource *r = &b->resource;
  perf__v1__resource__init(r);
  char host[256] = "";
  if (gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  host[sizeof host - 1] = '\0';
  if (!(r->app_name = own_string(b, cfg->app_name)) ||
      !(r->app_version = own_string(b, cfg->app_version)) ||
      !(r->environment = own_string(b, cfg->environment)) || !(r->host = own_string(b, host)))
    return PERF_E_NO_MEMORY;
  size_t n = cfg->tag_count < PERF_MAX_TAGS ? cfg->tag_count : PERF_MAX_TAGS;
  for (size_t i = 0; i < n; i++) {
    perf__v1__key_value__init(&b->tags[i]);
    if (!(b->tags[i].key = own_string(b, cfg->tags[i].key)) ||
        !(b->tags[i].value = own_string(b, cfg->tags[i].value)))
      return PERF_E_NO_MEMORY;
    b->tag_ptrs[i] = &b->tags[i];
  }
  r->n_tags = n;
  r->tags = n ? b->tag_ptrs : NULL;
  r->pid = (uint32_t)getpid();
  r->os = (char *)"linux";
  r->arch = (char *)ENCODER_ARCH;
  return PERF_OK;
}

/* A copy owned by the builder ("" for NULL); NULL when memory ran out. */
static char *own_string(perf__batch_builder_t *b, const char *s) {
  if (b->owned_count == sizeof b->owned / sizeof b->owned[0]) return NULL;
  char *c = strdup(s ? s : "");
  if (c) b->owned[b->owned_count++] = c;
  return c;
}

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* A length-delimited field numbered 1..15 (one tag byte) with `payload`
   bytes: what one table entry or event adds to the batch. */
static size_t field_bytes(size_t payload) {
  return 1 + varint_size(payload) + payload;
}

static int grow(void **items, size_t *cap, size_t need, size_t item_size) {
  if (need <= *cap) return PERF_OK;
  size_t c = *cap ? *cap : 16;
  while (c < need) {
    if (c > SIZE_MAX / 2 / item_size) return PERF_E_NO_MEMORY;
    c *= 2;
  }
  void *grown = realloc(*items, c * item_size);
  if (!grown) return PERF_E_NO_MEMORY;
  *items = grown;
  *cap = c;
  return PERF_OK;
}

static uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

/* Room for `need` entries, rehashing (oldest first, so chains stay newest
   first) when the load would pass one entry per bucket. */
static int index_reserve(intern_index_t *ix, size_t need) {
  if (need > ix->cap) {
    size_t cap = ix->cap ? ix->cap : 16;
    while (cap < need)
      cap *= 2;
    uint32_t *next = realloc(ix->next, cap * sizeof *next);
    if (next) ix->next = next;
    uint64_t *hash = next ? realloc(ix->hash, cap * sizeof *hash) : NULL;
    if (!hash) return PERF_E_NO_MEMORY;
    ix->hash = hash;
    ix->cap = cap;
  }
  if (need <= ix->nbuckets) return PERF_OK;
  size_t nb = ix->nbuckets ? ix->nbuckets : INDEX_MIN_BUCKETS;
  while (nb < need)
    nb *= 2;
  uint32_t *heads = calloc(nb, sizeof *heads);
  if (!heads) return PERF_E_NO_MEMORY;
  for (size_t i = 0; i < ix->count; i++) {
    size_t slot = ix->hash[i] & (nb - 1);
    ix->next[i] = heads[slot];
    heads[slot] = (uint32_t)i + 1;
  }
  free(ix->heads);
  ix->heads = heads;
  ix->nbuckets = nb;
  return PERF_OK;
}

static int64_t index_find(const intern_index_t *ix, uint64_t h, index_eq_fn eq,
                          const perf__batch_builder_t *b, const void *key) {
  if (!ix->nbuckets) return -1;
  for (uint32_t e = ix->heads[h & (ix->nbuckets - 1)]; e; e = ix->next[e - 1])
    if (ix->hash[e - 1] == h && eq(b, e - 1, key)) return (int64_t)e - 1;
  return -1;
}

/* Index the table's next entry (number ix->count) under hash h. */
static int index_add(intern_index_t *ix, uint64_t h) {
  if (ix->count >= UINT32_MAX - 1) return PERF_E_NO_MEMORY;
  int err = index_reserve(ix, ix->count + 1);
  if (err) return err;
  size_t slot = h & (ix->nbuckets - 1);
  ix->hash[ix->count] = h;
  ix->next[ix->count] = ix->heads[slot];
  ix->heads[slot] = (uint32_t)ix->count + 1;
  ix->count++;
  return PERF_OK;
}

/* Forget the newest entry: it heads its bucket's chain. */
static void index_pop(intern_index_t *ix) {
  size_t e = --ix->count;
  size_t slot = ix->hash[e] & (ix->nbuckets - 1);
  ix->heads[slot] = ix->next[e];
}

static void index_clear(intern_index_t *ix) {
  if (ix->heads) memset(ix->heads, 0, ix->nbuckets * sizeof *ix->heads);
  ix->count = 0;
}

static void index_free(intern_index_t *ix) {
  free(ix->heads);
  free(ix->next);
  free(ix->hash);
  memset(ix, 0, sizeof *ix);
}

static bool string_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key) {
  const string_key_t *k = key;
  const string_rec_t *s = &b->strings[entry];
  return s->len == k->len && memcmp(s->text, k->text, k->len) == 0;
}

static bool frame_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key) {
  const frame_key_t *k = key;
  const Perf__V1__Frame *f = &b->frames[entry];
  return f->module == k->module && f->address == k->address && f->function == k->function &&
         f->function_offset == k->function_offset && f->runtime_address == k->runtime_address;
}

static bool stack_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key) {
  const stack_key_t *k = key;
  const stack_rec_t *s = &b->stacks[entry];
  return s->depth == k->depth && (k->depth == 0 || memcmp(b->pool + s->first, k->frames,
                                                          k->depth * sizeof *k->frames) == 0);
}

/* Account for n more serialized bytes; FULL past max_bytes (the entry just
   added is popped by the caller's rollback). */
static int add_bytes(perf__batch_builder_t *b, size_t n) {
  b->bytes += n;
  return b->bytes > b->opts.max_bytes ? FULL : PERF_OK;
}

/* 0-based string index of text[0..len), added when new. */
static int intern_string(perf__batch_builder_t *b, const char *text, size_t len, uint32_t *out) {
  if (len > b->opts.max_bytes) return FULL;
  uint64_t h = 1469598103934665603ULL;
  for (size_t i = 0; i < len; i++)
    h = (h ^ (uint8_t)text[i]) * 1099511628211ULL;
  h = mix64(h);
  string_key_t key = {text, len};
  int64_t found = index_find(&b->string_ix, h, string_eq, b, &key);
  if (found >= 0) {
    *out = (uint32_t)found;
    return PERF_OK;
  }
  if (grow((void **)&b->strings, &b->strings_cap, b->n_strings + 1, sizeof *b->strings))
    return PERF_E_NO_MEMORY;
  char *copy = malloc(len + 1);
  if (!copy) return PERF_E_NO_MEMORY;
  if (len) memcpy(copy, text, len);
  copy[len] = '\0';
  if (index_add(&b->string_ix, h) != 0) {
    free(copy);
    return PERF_E_NO_MEMORY;
  }
  b->strings[b->n_strings] = (string_rec_t){copy, (uint32_t)len, 0};
  *out = (uint32_t)b->n_strings++;
  return add_bytes(b, field_bytes(len));
}

/* 1-based function named name[0..len), added when new. */
static int intern_function(perf__batch_builder_t *b, const char *name, size_t len, uint32_t *out) {
  uint32_t s;
  int err = intern_string(b, name, len, &s);
  if (err) return err;
  if (b->strings[s].function) {
    *out = b->strings[s].function;
    return PERF_OK;
  }
  if (grow((void **)&b->functions, &b->functions_cap, b->n_functions + 1, sizeof *b->functions))
    return PERF_E_NO_MEMORY;
  Perf__V1__Function *f = &b->functions[b->n_functions++];
  perf__v1__function__init(f);
  f->name = s;
  b->strings[s].function = (uint32_t)b->n_functions;
  *out = (uint32_t)b->n_functions;
  return add_bytes(b, field_bytes(perf__v1__function__get_packed_size(f)));
}

/* 1-based frame with these fields, added when new. */
static int intern_frame(perf__batch_builder_t *b, const frame_key_t *k, uint32_t *out) {
  uint64_t h = mix64(((uint64_t)k->module << 32 | k->function) ^ mix64(k->address) ^
                     mix64(k->function_offset + 0x9e3779b97f4a7c15ULL) ^
                     mix64(k->runtime_address + 0x632be59bd9b4e019ULL));
  int64_t found = index_find(&b->frame_ix, h, frame_eq, b, k);
  if (found >= 0) {
    *out = (uint32_t)found + 1;
    return PERF_OK;
  }
  if (grow((void **)&b->frames, &b->frames_cap, b->n_frames + 1, sizeof *b->frames) ||
      index_add(&b->frame_ix, h))
    return PERF_E_NO_MEMORY;
  Perf__V1__Frame *f = &b->frames[b->n_frames++];
  perf__v1__frame__init(f);
  f->module = k->module;
  f->address = k->address;
  f->function = k->function;
  f->function_offset = k->function_offset;
  f->runtime_address = k->runtime_address;
  *out = (uint32_t)b->n_frames;
  return add_bytes(b, field_bytes(perf__v1__frame__get_packed_size(f)));
}

/* 1-based stack of frames[0..depth), added when new. */
static int intern_stack(perf__batch_builder_t *b, const uint32_t *frames, uint32_t depth,
                        uint32_t *out) {
  uint64_t h = 1469598103934665603ULL ^ depth;
  for (uint32_t i = 0; i < depth; i++)
    h = (h ^ frames[i]) * 1099511628211ULL;
  h = mix64(h);
  stack_key_t key = {frames, depth};
  int64_t found = index_find(&b->stack_ix, h, stack_eq, b, &key);
  if (found >= 0) {
    *out = (uint32_t)found + 1;
    return PERF_OK;
  }
  if (b->pool_len > UINT32_MAX - depth ||
      grow((void **)&b->stacks, &b->stacks_cap, b->n_stacks + 1, sizeof *b->stacks) ||
      grow((void **)&b->pool, &b->pool_cap, b->pool_len + depth, sizeof *b->pool) ||
      index_add(&b->stack_ix, h))
    return PERF_E_NO_MEMORY;
  if (depth) memcpy(b->pool + b->pool_len, frames, depth * sizeof *frames);
  b->stacks[b->n_stacks++] = (stack_rec_t){(uint32_t)b->pool_len, depth};
  b->pool_len += depth;
  *out = (uint32_t)b->n_stacks;
  Perf__V1__Stack s = PERF__V1__STACK__INIT;
  s.n_frames = depth;
  s.frames = (uint32_t *)frames;
  return add_bytes(b, field_bytes(perf__v1__stack__get_packed_size(&s)));
}

/* 1-based module, added when new. Modules are few: a linear search. */
static int intern_module(perf__batch_builder_t *b, const char *path, const uint8_t *build_id,
                         size_t build_id_len, bool only_basename, uint64_t bias, uint64_t start,
                         uint64_t end, uint32_t *out) {
  for (size_t i = 0; i < b->n_modules; i++) {
    const Perf__V1__Module *m = &b->modules[i];
    if ((bool)m->only_basename == only_basename && m->build_id.len == build_id_len &&
        strcmp(m->path, path) == 0 &&
        (build_id_len == 0 || memcmp(m->build_id.data, build_id, build_id_len) == 0)) {
      *out = (uint32_t)i + 1;
      return PERF_OK;
    }
  }
  if (grow((void **)&b->modules, &b->modules_cap, b->n_modules + 1, sizeof *b->modules))
    return PERF_E_NO_MEMORY;
  char *p = strdup(path);
  uint8_t *id = build_id_len ? malloc(build_id_len) : NULL;
  if (!p || (build_id_len && !id)) {
    free(p);
    free(id);
    return PERF_E_NO_MEMORY;
  }
  if (build_id_len) memcpy(id, build_id, build_id_len);
  Perf__V1__Module *m = &b->modules[b->n_modules++];
  perf__v1__module__init(m);
  m->path = p;
  m->build_id.data = id;
  m->build_id.len = build_id_len;
  m->only_basename = only_basename;
  m->load_bias = bias;
  m->start = start;
  m->end = end;
  *out = (uint32_t)b->n_modules;
  return add_bytes(b, field_bytes(perf__v1__module__get_packed_size(m)));
}

/* Make `mods` (may be NULL) the snapshot the caches describe. */
static int use_snapshot(perf__batch_builder_t *b, perf__modules_t *mods) {
  if (b->cache_mods == mods && b->module_cache) return PERF_OK;
  size_t n = mods ? mods->map->count : 0;
  uint32_t *c = realloc(b->module_cache, (n ? n : 1) * sizeof *c);
  if (!c) return PERF_E_NO_MEMORY;
  b->module_cache = c;
  if (mods) atomic_fetch_add(&mods->refs, 1);
  perf__modules_release(b->cache_mods);
  b->cache_mods = mods;
  b->module_cache_len = n;
  invalidate_caches(b);
  return PERF_OK;
}

static void invalidate_caches(perf__batch_builder_t *b) {
  if (b->module_cache && b->module_cache_len)
    memset(b->module_cache, 0, b->module_cache_len * sizeof *b->module_cache);
  b->pc_count = 0;
  if (++b->pc_gen == 0) { /* wrapped: really empty the slots */
    if (b->pc_cache) memset(b->pc_cache, 0, b->pc_cap * sizeof *b->pc_cache);
    b->pc_gen = 1;
  }
}

/* 1-based frame of a pc captured in this process, from snapshot `mods`
   (which the caches describe; NULL: no module known). */
static int live_frame(perf__batch_builder_t *b, perf__modules_t *mods, uintptr_t pc, bool ret,
                      uint32_t *out) {
  uint64_t key = (uint64_t)pc * 2 + ret;
  if (b->pc_count * 2 >= b->pc_cap) { /* keep the load at most one half */
    size_t cap = b->pc_cap ? b->pc_cap * 2 : 1024;
    pc_slot_t *fresh = calloc(cap, sizeof *fresh);
    if (!fresh) return PERF_E_NO_MEMORY;
    for (size_t i = 0; i < b->pc_cap; i++) {
      pc_slot_t s = b->pc_cache[i];
      if (s.gen != b->pc_gen) continue;
      size_t j = mix64(s.key) & (cap - 1);
      while (fresh[j].gen == b->pc_gen)
        j = (j + 1) & (cap - 1);
      fresh[j] = s;
    }
    free(b->pc_cache);
    b->pc_cache = fresh;
    b->pc_cap = cap;
  }
  size_t j = mix64(key) & (b->pc_cap - 1);
  while (b->pc_cache[j].gen == b->pc_gen) {
    if (b->pc_cache[j].key == key) {
      *out = b->pc_cache[j].frame;
      return PERF_OK;
    }
    j = (j + 1) & (b->pc_cap - 1);
  }

  frame_key_t k = {0, 0, pc, 0, 0};
  uintptr_t lookup = ret ? pc - 1 : pc;
  const perf__module_t *m = mods ? perf__module_map_find(mods->map, lookup) : NULL;
  int err = PERF_OK;
  if (m) {
    size_t mi = (size_t)(m - mods->map->modules);
    k.address = pc - m->bias;
    if (!b->module_cache[mi]) {
      uint32_t idx = 0;
      err = intern_module(b, m->path, m->build_id, m->build_id_len, false, m->bias,
                          m->start - m->bias, m->end - m->bias, &idx);
      if (err) return err;
      b->module_cache[mi] = idx;
    }
    k.module = b->module_cache[mi];
  }
  if (b->opts.symbolize && mods) {
    perf__frame_info_t fi;
    perf__modules_symbolize(mods, pc, ret, &fi);
    if (fi.symbol) {
      if ((err = intern_function(b, fi.symbol, strlen(fi.symbol), &k.function)) != 0) return err;
      k.function_offset = fi.offset;
    }
  }
  uint32_t frame;
  if ((err = intern_frame(b, &k, &frame)) != 0) return err;
  /* Slot j is still free: nothing entered the cache meanwhile. */
  b->pc_cache[j] = (pc_slot_t){key, frame, b->pc_gen};
  b->pc_count++;
  *out = frame;
  return PERF_OK;
}

/*
 * 1-based frame of one line of a previous run's stack text,
 * "<idx> <module> 0x<pc> <symbol> + <offset>" (docs/protocol.md): a
 * basename-only module, the function and its offset when named, else the
 * printed module-relative address ("?? + <module_rel>"); the pc goes to
 * runtime_address. 0 in *out when the line is not a frame.
 */
static int text_frame(perf__batch_builder_t *b, const char *line, size_t len, uint32_t *out) {
  *out = 0;
  const char *p = line, *end = line + len;
  if (p == end || *p < '0' || *p > '9') return PERF_OK;
  while (p < end && *p >= '0' && *p <= '9')
    p++;
  while (p < end && *p == ' ')
    p++;
  const char *module = p;
  while (p < end && *p != ' ')
    p++;
  char mod[256]; /* a basename: at most NAME_MAX bytes */
  size_t mlen = (size_t)(p - module);
  if (mlen == 0 || mlen >= sizeof mod) return PERF_OK;
  memcpy(mod, module, mlen);
  mod[mlen] = '\0';
  while (p < end && *p == ' ')
    p++;
  if (end - p < 3 || p[0] != '0' || p[1] != 'x') return PERF_OK;
  p += 2;
  uint64_t pc = 0;
  int digits = 0;
  for (; p < end && *p != ' '; p++, digits++) {
    int d = *p >= '0' && *p <= '9'   ? *p - '0'
            : *p >= 'a' && *p <= 'f' ? *p - 'a' + 10
            : *p >= 'A' && *p <= 'F' ? *p - 'A' + 10
                                     : -1;
    if (d < 0 || digits == 16) return PERF_OK;
    pc = pc << 4 | (uint64_t)d;
  }
  if (!digits || p == end) return PERF_OK;
  const char *symbol = ++p;
  /* "<symbol> + <offset>": the last " + " splits them. */
  const char *plus = NULL;
  for (const char *q = symbol; q + 3 <= end; q++)
    if (q[0] == ' ' && q[1] == '+' && q[2] == ' ') plus = q;
  if (!plus || plus == symbol || plus + 3 == end) return PERF_OK;
  uint64_t off = 0;
  for (const char *q = plus + 3; q < end; q++) {
    if (*q < '0' || *q > '9' || off > (UINT64_MAX - 9) / 10) return PERF_OK;
    off = off * 10 + (uint64_t)(*q - '0');
  }
  size_t slen = (size_t)(plus - symbol);

  frame_key_t k = {0, 0, 0, 0, pc};
  int err = PERF_OK;
  if (strcmp(mod, "??") != 0) err = intern_module(b, mod, NULL, 0, true, 0, 0, 0, &k.module);
  if (!err && !(slen == 2 && memcmp(symbol, "??", 2) == 0)) {
    err = intern_function(b, symbol, slen, &k.function);
    k.function_offset = off;
  } else {
    k.address = off; /* module-relative, or the pc itself in no module */
  }
  if (!err) err = intern_frame(b, &k, out);
  return err;
}

static int build_common(perf__batch_builder_t *b, const perf__event_t *ev, Perf__V1__Event *e) {
  switch (ev->kind) {
  case PERF__EVENT_HANG: e->kind = PERF__V1__EVENT_KIND__EVENT_KIND_HANG; break;
  case PERF__EVENT_FATAL_HANG: e->kind = PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG; break;
  case PERF__EVENT_CPU: e->kind = PERF__V1__EVENT_KIND__EVENT_KIND_CPU; break;
  case PERF__EVENT_MANUAL: e->kind = PERF__V1__EVENT_KIND__EVENT_KIND_MANUAL; break;
  }
  e->start_unix_nanos = ev->start_wall_ns;
  e->duration_nanos = ev->duration_ns;
  e->tid = (uint32_t)ev->tid;
  e->cpu_percent = ev->cpu_percent;
  e->samples_dropped = ev->samples_over;
  size_t rlen = strnlen(ev->reason, sizeof ev->reason);
  if (rlen) {
    char *r = malloc(rlen + 1);
    if (!r) return PERF_E_NO_MEMORY;
    memcpy(r, ev->reason, rlen);
    r[rlen] = '\0';
    e->reason = r;
  }
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
    const perf__thread_t *src = &ev->threads[i];
    t[i].tid = (uint32_t)src->tid;
    t[i].cpu_percent = src->cpu_percent;
    int err = intern_string(b, src->name, strnlen(src->name, sizeof src->name), &t[i].name);
    if (err) return err;
  }
  return PERF_OK;
}

static int build_live(perf__batch_builder_t *b, const perf__event_t *ev, Perf__V1__Event *e) {
  int err = build_common(b, ev, e);
  if (err) return err;
  size_t ns = ev->stack_count;
  if (ns && (err = use_snapshot(b, ev->mods)) != 0) return err;
  if (grow((void **)&b->stack_map, &b->stack_map_cap, ns, sizeof *b->stack_map) ||
      grow((void **)&b->counts, &b->counts_cap, ns, sizeof *b->counts))
    return PERF_E_NO_MEMORY;
  for (size_t i = 0; i < ns; i++) {
    const perf__stack_t *s = &ev->stacks[i];
    uint32_t depth = s->depth < PERF__EVENT_MAX_DEPTH ? s->depth : PERF__EVENT_MAX_DEPTH;
    for (uint32_t f = 0; f < depth; f++)
      if ((err = live_frame(b, ev->mods, ev->frames[s->first + f], f > 0, &b->scratch[f])) != 0)
        return err;
    if ((err = intern_stack(b, b->scratch, depth, &b->stack_map[i])) != 0) return err;
    b->counts[i] = (count_rec_t){s->samples, (uint32_t)i, b->stack_map[i], (uint32_t)s->tid};
  }
  if ((err = set_counts(b, e, ns)) != 0) return err;

  size_t n = ev->sample_count, failed = 0;
  bool other_tid = false;
  for (size_t i = 0; i < n; i++) {
    const perf__sample_t *s = &ev->samples[i];
    failed += s->stack < 0 || (size_t)s->stack >= ns;
    other_tid = other_tid || s->tid != ev->tid;
  }
  if (!n) return PERF_OK;
  if (!(e->sample_offsets_micros = malloc(n * sizeof *e->sample_offsets_micros)) ||
      !(e->sample_stacks = malloc(n * sizeof *e->sample_stacks)) ||
      (other_tid && !(e->sample_tids = malloc(n * sizeof *e->sample_tids))) ||
      (failed && !(e->sample_errors = malloc(failed * sizeof *e->sample_errors))))
    return PERF_E_NO_MEMORY;
  e->n_sample_offsets_micros = e->n_sample_stacks = n;
  e->n_sample_tids = other_tid ? n : 0;
  /* Whole microseconds, each time truncated first: the running sum has no
     drift. */
  int64_t prev = us_floor(ev->start_mono_ns);
  for (size_t i = 0; i < n; i++) {
    const perf__sample_t *s = &ev->samples[i];
    int64_t us = us_floor(s->mono_ns);
    e->sample_offsets_micros[i] = us - prev;
    prev = us;
    bool ok = s->stack >= 0 && (size_t)s->stack < ns;
    e->sample_stacks[i] = ok ? b->stack_map[s->stack] : 0;
    if (other_tid) e->sample_tids[i] = (uint32_t)s->tid;
    if (!ok) e->sample_errors[e->n_sample_errors++] = s->error ? s->error : PERF_E_SYSTEM;
  }
  return PERF_OK;
}

/* Microseconds, rounded towards minus infinity. */
static int64_t us_floor(int64_t ns) {
  return ns >= 0 ? ns / 1000 : -((-(ns + 1)) / 1000) - 1;
}

static int build_text(perf__batch_builder_t *b, const perf__event_t *ev, Perf__V1__Event *e) {
  int err = build_common(b, ev, e);
  size_t n = 0;          /* stacks finished */
  bool in_stack = false; /* inside a "stack samples=<n> thread=<tid>" block */
  uint32_t depth = 0, samples = 0, tid = 0;
  const char *p = ev->stacks_text;
  while (!err && *p) {
    const char *nl = strchr(p, '\n');
    size_t len = nl ? (size_t)(nl - p) : strlen(p);
    uint32_t cnt, t;
    if (text_header(p, len, &cnt, &t)) {
      if (in_stack) err = end_text_stack(b, n++, depth, samples, tid);
      in_stack = true;
      depth = 0;
      samples = cnt;
      tid = t;
    } else if (in_stack && depth < PERF__EVENT_MAX_DEPTH) {
      uint32_t frame;
      err = text_frame(b, p, len, &frame);
      if (!err && frame) b->scratch[depth++] = frame;
    }
    p += nl ? len + 1 : len;
  }
  if (!err && in_stack) err = end_text_stack(b, n++, depth, samples, tid);
  if (!err) err = set_counts(b, e, n);
  return err;
}

/* "stack samples=<n> thread=<tid>" */
static bool text_header(const char *p, size_t len, uint32_t *samples, uint32_t *tid) {
  static const char a[] = "stack samples=", c[] = " thread=";
  if (len < sizeof a - 1 || memcmp(p, a, sizeof a - 1) != 0) return false;
  const char *q = p + sizeof a - 1, *end = p + len;
  uint64_t v = 0;
  if (q == end || *q < '0' || *q > '9') return false;
  while (q < end && *q >= '0' && *q <= '9' && v <= UINT32_MAX)
    v = v * 10 + (uint64_t)(*q++ - '0');
  if (v > UINT32_MAX || (size_t)(end - q) < sizeof c - 1 || memcmp(q, c, sizeof c - 1) != 0)
    return false;
  *samples = (uint32_t)v;
  q += sizeof c - 1;
  v = 0;
  if (q == end || *q < '0' || *q > '9') return false;
  while (q < end && *q >= '0' && *q <= '9' && v <= UINT32_MAX)
    v = v * 10 + (uint64_t)(*q++ - '0');
  if (v > UINT32_MAX) return false;
  *tid = (uint32_t)v;
  return true;
}

/* Intern the stack in b->scratch[0..depth) as the n-th count of the event. */
static int end_text_stack(perf__batch_builder_t *b, size_t n, uint32_t depth, uint32_t samples,
                          uint32_t tid) {
  if (grow((void **)&b->counts, &b->counts_cap, n + 1, sizeof *b->counts)) return PERF_E_NO_MEMORY;
  uint32_t stack;
  int err = intern_stack(b, b->scratch, depth, &stack);
  if (!err) b->counts[n] = (count_rec_t){samples, (uint32_t)n, stack, tid};
  return err;
}

/* The event's stack_counts from b->counts[0..n), most samples first, and
   its dominant stack. */
static int set_counts(perf__batch_builder_t *b, Perf__V1__Event *e, size_t n) {
  if (!n) return PERF_OK;
  qsort(b->counts, n, sizeof *b->counts, compare_counts);
  void *block = malloc(n * (sizeof(Perf__V1__StackCount *) + sizeof(Perf__V1__StackCount)));
  if (!block) return PERF_E_NO_MEMORY;
  e->stack_counts = block;
  e->n_stack_counts = n;
  Perf__V1__StackCount *c = (Perf__V1__StackCount *)(e->stack_counts + n);
  for (size_t i = 0; i < n; i++) {
    perf__v1__stack_count__init(&c[i]);
    c[i].stack = b->counts[i].stack;
    c[i].tid = b->counts[i].tid;
    c[i].samples = b->counts[i].samples;
    e->stack_counts[i] = &c[i];
  }
  e->dominant_stack = c[0].stack;
  return PERF_OK;
}

static int compare_counts(const void *a, const void *b) {
  const count_rec_t *x = a, *y = b;
  if (x->samples != y->samples) return x->samples > y->samples ? -1 : 1;
  return (x->order > y->order) - (x->order < y->order);
}

static void free_event(Perf__V1__Event *e) {
  if (e->reason != (char *)protobuf_c_empty_string) free(e->reason);
  free(e->threads);
  free(e->stack_counts);
  free(e->sample_offsets_micros);
  free(e->sample_tids);
  free(e->sample_stacks);
  free(e->sample_errors);
}

static mark_t take_mark(const perf__batch_builder_t *b) {
  return (mark_t){b->n_strings, b->n_modules, b->n_functions, b->n_frames,
                  b->n_stacks,  b->pool_len,  b->bytes};
}

static void rollback(perf__batch_builder_t *b, const mark_t *m) {
  while (b->n_stacks > m->stacks) {
    index_pop(&b->stack_ix);
    b->n_stacks--;
  }
  b->pool_len = m->pool;
  while (b->n_frames > m->frames) {
    index_pop(&b->frame_ix);
    b->n_frames--;
  }
  while (b->n_functions > m->functions)
    b->strings[b->functions[--b->n_functions].name].function = 0;
  while (b->n_modules > m->modules) {
    Perf__V1__Module *mod = &b->modules[--b->n_modules];
    free(mod->path);
    free(mod->build_id.data);
  }
  while (b->n_strings > m->strings) {
    index_pop(&b->string_ix);
    free(b->strings[--b->n_strings].text);
  }
  b->bytes = m->bytes;
  invalidate_caches(b); /* they may name popped entries */
}

/* Empty every table but strings[0] (""). */
static void clear_tables(perf__batch_builder_t *b) {
  for (size_t i = 0; i < b->n_events; i++)
    free_event(&b->events[i]);
  b->n_events = 0;
  b->opened_ns = 0;
  mark_t keep = {b->n_strings ? 1 : 0, 0, 0, 0, 0, 0, 0};
  keep.bytes = b->header_bytes + (b->n_strings ? field_bytes(0) : 0);
  /* Popping one by one would also do; clearing the indexes is cheaper. */
  index_clear(&b->stack_ix);
  index_clear(&b->frame_ix);
  b->n_stacks = b->n_frames = b->pool_len = 0;
  while (b->n_functions)
    b->strings[b->functions[--b->n_functions].name].function = 0;
  rollback(b, &keep);
}

/* Every reference in range, the per-sample arrays consistent. */
static int validate_batch(const Perf__V1__Batch *bt) {
  size_t ns = bt->n_strings, nm = bt->n_modules, nf = bt->n_functions, nfr = bt->n_frames,
         nst = bt->n_stacks;
#define STRING_OK(i) ((i) == 0 || (i) < ns)
  if (bt->batch_id.len != PERF__BATCH_ID_BYTES) return -1;
  for (size_t i = 0; i < nf; i++)
    if (!STRING_OK(bt->functions[i]->name) || !STRING_OK(bt->functions[i]->system_name)) return -1;
  for (size_t i = 0; i < nfr; i++)
    if (bt->frames[i]->module > nm || bt->frames[i]->function > nf) return -1;
  for (size_t i = 0; i < nst; i++)
    for (size_t j = 0; j < bt->stacks[i]->n_frames; j++)
      if (bt->stacks[i]->frames[j] == 0 || bt->stacks[i]->frames[j] > nfr) return -1;
  for (size_t i = 0; i < bt->n_events; i++) {
    const Perf__V1__Event *e = bt->events[i];
    for (size_t j = 0; j < e->n_threads; j++)
      if (!STRING_OK(e->threads[j]->name)) return -1;
    for (size_t j = 0; j < e->n_stack_counts; j++)
      if (e->stack_counts[j]->stack == 0 || e->stack_counts[j]->stack > nst) return -1;
    if (e->dominant_stack > nst) return -1;
    size_t n = e->n_sample_stacks, failed = 0;
    if (e->n_sample_offsets_micros != n || (e->n_sample_tids != 0 && e->n_sample_tids != n))
      return -1;
    for (size_t j = 0; j < n; j++) {
      if (e->sample_stacks[j] > nst) return -1;
      failed += e->sample_stacks[j] == 0;
    }
    if (e->n_sample_errors != failed) return -1;
  }
#undef STRING_OK
  return 0;
}
