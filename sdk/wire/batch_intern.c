/*
 * batch_intern.c - the deduplicated tables of the open batch: strings,
 * functions, modules, frames (with their lines) and stacks, each entry
 * added once and sized as it is added (see batch.h, batch_internal.h).
 * Writer thread (whoever owns the builder).
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/hash.h"
#include "sdk/wire/batch_internal.h"

#define INDEX_MIN_BUCKETS 64u /* hash index buckets at first use */

/* Generations are unique in the process, so that a builder freed and
   another made at the same address never look alike to a caller's cache. */
static _Atomic uint64_t g_last_generation;

typedef bool (*index_eq_fn)(const perf__batch_builder_t *b, uint32_t entry, const void *key);

typedef struct stack_key_s {
  const uint32_t *frames;
  uint32_t depth;
  Perf__V1__StackEnd end;
} stack_key_t;

typedef struct function_key_s {
  uint32_t name, system_name;
} function_key_t;

typedef struct string_key_s {
  const char *text;
  size_t len;
} string_key_t;

static size_t varint_size(uint64_t v);
static int index_reserve(perf__intern_index_t *ix, size_t need);
static int64_t index_find(const perf__intern_index_t *ix, uint64_t h, index_eq_fn eq,
                          const perf__batch_builder_t *b, const void *key);
static int index_add(perf__intern_index_t *ix, uint64_t h);
static void index_pop(perf__intern_index_t *ix);
static void index_clear(perf__intern_index_t *ix);
static void index_free(perf__intern_index_t *ix);
static bool string_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key);
static bool function_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key);
static bool frame_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key);
static bool stack_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key);
static bool module_eq(const Perf__V1__Module *m, const perf__batch_module_t *k);

int perf__batch_intern_string(perf__batch_builder_t *b, const char *text, size_t len,
                              uint32_t *out) {
  if (len > b->opts.max_bytes) return PERF__BATCH_FULL;
  uint64_t h = perf__mix64(perf__fnv1a(PERF__FNV_OFFSET, text, len));
  string_key_t key = {text, len};
  int64_t found = index_find(&b->string_ix, h, string_eq, b, &key);
  if (found >= 0) {
    *out = (uint32_t)found;
    return PERF_OK;
  }
  if (perf__batch_grow((void **)&b->strings, &b->strings_cap, b->n_strings + 1, sizeof *b->strings))
    return PERF_E_NO_MEMORY;
  char *copy = malloc(len + 1);
  if (!copy) return PERF_E_NO_MEMORY;
  if (len) memcpy(copy, text, len);
  copy[len] = '\0';
  if (index_add(&b->string_ix, h) != 0) {
    free(copy);
    return PERF_E_NO_MEMORY;
  }
  b->strings[b->n_strings] = (perf__string_rec_t){copy, (uint32_t)len};
  *out = (uint32_t)b->n_strings++;
  return perf__batch_add_bytes(b, perf__batch_field_bytes(len));
}

int perf__batch_intern_function(perf__batch_builder_t *b, const perf__batch_function_t *f,
                                uint32_t *out) {
  function_key_t key = {0, 0};
  int err = perf__batch_intern_string(b, f->name, f->name_len, &key.name);
  if (!err && f->system_name)
    err = perf__batch_intern_string(b, f->system_name, f->system_name_len, &key.system_name);
  if (err) return err;
  if (key.system_name == key.name) key.system_name = 0; /* only said when it differs */
  uint64_t h = perf__mix64((uint64_t)key.name << 32 | key.system_name);
  int64_t found = index_find(&b->function_ix, h, function_eq, b, &key);
  if (found >= 0) {
    *out = (uint32_t)found + 1;
    return PERF_OK;
  }
  if (perf__batch_grow((void **)&b->functions, &b->functions_cap, b->n_functions + 1,
                       sizeof *b->functions) ||
      index_add(&b->function_ix, h))
    return PERF_E_NO_MEMORY;
  Perf__V1__Function *fn = &b->functions[b->n_functions++];
  perf__v1__function__init(fn);
  fn->name = key.name;
  fn->system_name = key.system_name;
  *out = (uint32_t)b->n_functions;
  return perf__batch_add_bytes(b, perf__batch_field_bytes(perf__v1__function__get_packed_size(fn)));
}

static uint64_t frame_hash(const perf__batch_frame_t *k) {
  uint64_t lines =
      perf__fnv1a(PERF__FNV_OFFSET ^ k->line_count, k->lines, k->line_count * sizeof *k->lines);
  return perf__mix64(((uint64_t)k->module << 32 | k->function) ^ perf__mix64(k->address) ^
                     perf__mix64(k->function_offset + 0x9e3779b97f4a7c15ULL) ^
                     perf__mix64(k->runtime_address + 0x632be59bd9b4e019ULL) ^ lines);
}

/* Room for one more frame and its lines. */
static int frame_room(perf__batch_builder_t *b, size_t lines) {
  if (perf__batch_grow((void **)&b->frames, &b->frames_cap, b->n_frames + 1, sizeof *b->frames) ||
      perf__batch_grow((void **)&b->frame_recs, &b->frame_recs_cap, b->n_frames + 1,
                       sizeof *b->frame_recs) ||
      perf__batch_grow((void **)&b->line_pool, &b->lines_cap, b->n_lines + lines,
                       sizeof *b->line_pool) ||
      b->n_lines + lines > UINT32_MAX)
    return PERF_E_NO_MEMORY;
  return PERF_OK;
}

int perf__batch_intern_frame(perf__batch_builder_t *b, const perf__batch_frame_t *k,
                             uint32_t *out) {
  if (k->line_count > PERF__BATCH_MAX_LINES || (k->line_count && !k->lines))
    return PERF_E_INVALID_ARGUMENT;
  uint64_t h = frame_hash(k);
  int64_t found = index_find(&b->frame_ix, h, frame_eq, b, k);
  if (found >= 0) {
    *out = (uint32_t)found + 1;
    return PERF_OK;
  }
  if (frame_room(b, k->line_count) || index_add(&b->frame_ix, h)) return PERF_E_NO_MEMORY;
  Perf__V1__Line *ptrs[PERF__BATCH_MAX_LINES];
  for (size_t i = 0; i < k->line_count; i++) {
    Perf__V1__Line *l = ptrs[i] = &b->line_pool[b->n_lines + i];
    perf__v1__line__init(l);
    l->function = k->lines[i].function;
    l->file = k->lines[i].file;
    l->line = k->lines[i].line;
    l->column = k->lines[i].column;
  }
  b->frame_recs[b->n_frames] = (perf__frame_rec_t){(uint32_t)b->n_lines, (uint32_t)k->line_count};
  b->n_lines += k->line_count;
  Perf__V1__Frame *f = &b->frames[b->n_frames++];
  perf__v1__frame__init(f);
  f->module = k->module;
  f->address = k->address;
  f->function = k->function;
  f->function_offset = k->function_offset;
  f->runtime_address = k->runtime_address;
  *out = (uint32_t)b->n_frames;
  /* Sized with its lines; pack_batch points them at the pool again. */
  f->n_lines = k->line_count;
  f->lines = ptrs;
  size_t size = perf__v1__frame__get_packed_size(f);
  f->n_lines = 0;
  f->lines = NULL;
  return perf__batch_add_bytes(b, perf__batch_field_bytes(size));
}

int perf__batch_intern_stack(perf__batch_builder_t *b, const uint32_t *frames, uint32_t depth,
                             Perf__V1__StackEnd end, uint32_t *out) {
  uint64_t h = perf__mix64(
      perf__fnv1a(PERF__FNV_OFFSET ^ depth ^ (uint64_t)end << 40, frames, depth * sizeof *frames));
  stack_key_t key = {frames, depth, end};
  int64_t found = index_find(&b->stack_ix, h, stack_eq, b, &key);
  if (found >= 0) {
    *out = (uint32_t)found + 1;
    return PERF_OK;
  }
  if (b->pool_len > UINT32_MAX - depth ||
      perf__batch_grow((void **)&b->stacks, &b->stacks_cap, b->n_stacks + 1, sizeof *b->stacks) ||
      perf__batch_grow((void **)&b->pool, &b->pool_cap, b->pool_len + depth, sizeof *b->pool) ||
      index_add(&b->stack_ix, h))
    return PERF_E_NO_MEMORY;
  if (depth) memcpy(b->pool + b->pool_len, frames, depth * sizeof *frames);
  b->stacks[b->n_stacks++] = (perf__stack_rec_t){(uint32_t)b->pool_len, depth, end};
  b->pool_len += depth;
  *out = (uint32_t)b->n_stacks;
  Perf__V1__Stack s = PERF__V1__STACK__INIT;
  s.n_frames = depth;
  s.frames = (uint32_t *)frames;
  s.end = end;
  return perf__batch_add_bytes(b, perf__batch_field_bytes(perf__v1__stack__get_packed_size(&s)));
}

/* Modules are few: a linear search. */
int perf__batch_intern_module(perf__batch_builder_t *b, const perf__batch_module_t *k,
                              uint32_t *out) {
  for (size_t i = 0; i < b->n_modules; i++) {
    if (module_eq(&b->modules[i], k)) {
      *out = (uint32_t)i + 1;
      return PERF_OK;
    }
  }
  if (perf__batch_grow((void **)&b->modules, &b->modules_cap, b->n_modules + 1, sizeof *b->modules))
    return PERF_E_NO_MEMORY;
  char *p = strdup(k->path ? k->path : "");
  uint8_t *id = k->build_id_len ? malloc(k->build_id_len) : NULL;
  if (!p || (k->build_id_len && !id)) {
    free(p);
    free(id);
    return PERF_E_NO_MEMORY;
  }
  if (k->build_id_len) memcpy(id, k->build_id, k->build_id_len);
  Perf__V1__Module *m = &b->modules[b->n_modules++];
  perf__v1__module__init(m);
  m->path = p;
  m->build_id.data = id;
  m->build_id.len = k->build_id_len;
  m->only_basename = k->only_basename;
  m->executable = k->executable;
  m->load_bias = k->load_bias;
  m->start = k->start;
  m->end = k->end;
  *out = (uint32_t)b->n_modules;
  return perf__batch_add_bytes(b, perf__batch_field_bytes(perf__v1__module__get_packed_size(m)));
}

uint64_t perf__batch_new_generation(void) {
  return atomic_fetch_add(&g_last_generation, 1) + 1;
}

int perf__batch_grow(void **items, size_t *cap, size_t need, size_t item_size) {
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

size_t perf__batch_field_bytes(size_t payload) {
  return 1 + varint_size(payload) + payload;
}

int perf__batch_add_bytes(perf__batch_builder_t *b, size_t n) {
  b->bytes += n;
  return b->bytes > b->opts.max_bytes ? PERF__BATCH_FULL : PERF_OK;
}

perf__batch_mark_t perf__batch_take_mark(const perf__batch_builder_t *b) {
  return (perf__batch_mark_t){b->n_strings, b->n_modules, b->n_functions, b->n_frames,
                              b->n_lines,   b->n_stacks,  b->pool_len,    b->bytes};
}

void perf__batch_rollback(perf__batch_builder_t *b, const perf__batch_mark_t *m) {
  while (b->n_stacks > m->stacks) {
    index_pop(&b->stack_ix);
    b->n_stacks--;
  }
  b->pool_len = m->pool;
  while (b->n_frames > m->frames) {
    index_pop(&b->frame_ix);
    b->n_frames--;
  }
  b->n_lines = m->lines;
  while (b->n_functions > m->functions) {
    index_pop(&b->function_ix);
    b->n_functions--;
  }
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
  b->generation = perf__batch_new_generation(); /* callers' caches may name popped entries */
}

void perf__batch_clear_tables(perf__batch_builder_t *b) {
  perf__batch_mark_t keep = {b->n_strings ? 1 : 0, 0, 0, 0, 0, 0, 0, 0};
  keep.bytes = b->header_bytes + (b->n_strings ? perf__batch_field_bytes(0) : 0);
  /* Popping one by one would also do; clearing the indexes is cheaper. */
  index_clear(&b->stack_ix);
  index_clear(&b->frame_ix);
  index_clear(&b->function_ix);
  b->n_stacks = b->n_frames = b->n_lines = b->pool_len = b->n_functions = 0;
  perf__batch_rollback(b, &keep);
}

void perf__batch_free_tables(perf__batch_builder_t *b) {
  perf__batch_clear_tables(b);
  for (size_t i = 0; i < b->n_strings; i++)
    free(b->strings[i].text);
  free(b->strings);
  index_free(&b->string_ix);
  index_free(&b->frame_ix);
  index_free(&b->stack_ix);
  index_free(&b->function_ix);
  free(b->modules);
  free(b->functions);
  free(b->frames);
  free(b->frame_recs);
  free(b->line_pool);
  free(b->stacks);
  free(b->pool);
}

static size_t varint_size(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    n++;
  }
  return n;
}

/* Room for `need` entries, rehashing (oldest first, so chains stay newest
   first) when the load would pass one entry per bucket. */
static int index_reserve(perf__intern_index_t *ix, size_t need) {
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

static int64_t index_find(const perf__intern_index_t *ix, uint64_t h, index_eq_fn eq,
                          const perf__batch_builder_t *b, const void *key) {
  if (!ix->nbuckets) return -1;
  for (uint32_t e = ix->heads[h & (ix->nbuckets - 1)]; e; e = ix->next[e - 1])
    if (ix->hash[e - 1] == h && eq(b, e - 1, key)) return (int64_t)e - 1;
  return -1;
}

/* Index the table's next entry (number ix->count) under hash h. */
static int index_add(perf__intern_index_t *ix, uint64_t h) {
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
static void index_pop(perf__intern_index_t *ix) {
  size_t e = --ix->count;
  size_t slot = ix->hash[e] & (ix->nbuckets - 1);
  ix->heads[slot] = ix->next[e];
}

static void index_clear(perf__intern_index_t *ix) {
  if (ix->heads) memset(ix->heads, 0, ix->nbuckets * sizeof *ix->heads);
  ix->count = 0;
}

static void index_free(perf__intern_index_t *ix) {
  free(ix->heads);
  free(ix->next);
  free(ix->hash);
  memset(ix, 0, sizeof *ix);
}

static bool string_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key) {
  const string_key_t *k = key;
  const perf__string_rec_t *s = &b->strings[entry];
  return s->len == k->len && memcmp(s->text, k->text, k->len) == 0;
}

static bool function_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key) {
  const function_key_t *k = key;
  return b->functions[entry].name == k->name && b->functions[entry].system_name == k->system_name;
}

static bool frame_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key) {
  const perf__batch_frame_t *k = key;
  const Perf__V1__Frame *f = &b->frames[entry];
  const perf__frame_rec_t *r = &b->frame_recs[entry];
  if (f->module != k->module || f->address != k->address || f->function != k->function ||
      f->function_offset != k->function_offset || f->runtime_address != k->runtime_address ||
      r->count != k->line_count)
    return false;
  for (size_t i = 0; i < k->line_count; i++) {
    const Perf__V1__Line *l = &b->line_pool[r->first + i];
    const perf__batch_line_t *kl = &k->lines[i];
    if (l->function != kl->function || l->file != kl->file || l->line != kl->line ||
        l->column != kl->column)
      return false;
  }
  return true;
}

static bool stack_eq(const perf__batch_builder_t *b, uint32_t entry, const void *key) {
  const stack_key_t *k = key;
  const perf__stack_rec_t *s = &b->stacks[entry];
  return s->depth == k->depth && s->end == k->end &&
         (k->depth == 0 ||
          memcmp(b->pool + s->first, k->frames, k->depth * sizeof *k->frames) == 0);
}

static bool module_eq(const Perf__V1__Module *m, const perf__batch_module_t *k) {
  return (bool)m->only_basename == k->only_basename && (bool)m->executable == k->executable &&
         m->build_id.len == k->build_id_len && strcmp(m->path, k->path ? k->path : "") == 0 &&
         (k->build_id_len == 0 || memcmp(m->build_id.data, k->build_id, k->build_id_len) == 0);
}
