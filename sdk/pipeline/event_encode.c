/*
 * event_encode.c - SDK events into batches (see event_encode.h): modules,
 * frames named with their inline chains and source lines (names demangled,
 * the raw linkage name as system_name), stacks with how they ended, the
 * samples. Writer thread: naming (sdk/symbols) happens here, never on the
 * watched thread; each pc is named once per batch (the pc cache).
 */
#include "sdk/pipeline/event_encode.h"

#include <stdlib.h>
#include <string.h>

#include "sdk/base/hash.h"

_Static_assert(PERF__SYM_MAX_LINES <= PERF__BATCH_MAX_LINES, "a frame's chain fits the wire");
_Static_assert((int)PERF__STACK_END_NOT_ASCENDING ==
                   (int)PERF__V1__STACK_END__STACK_END_NOT_ASCENDING,
               "stack ends are the wire's values");

#define UNNAMED_MAX 16

_Static_assert((int)PERF__STATE_OTHER == (int)PERF__V1__SAMPLE_STATE__SAMPLE_STATE_OTHER &&
                   (int)PERF__FD_OTHER == (int)PERF__V1__FD_KIND__FD_KIND_OTHER,
               "sample states are the wire's values");

typedef struct pc_slot_s {
  uint64_t key;   /* pc * 2 + return_address */
  uint32_t frame; /* 1-based */
  uint32_t gen;   /* the slot is empty unless gen == encoder's pc_gen */
} pc_slot_t;

struct perf__event_encoder_s {
  const perf__batch_builder_t *builder; /* what the caches describe ... */
  uint64_t generation;                  /* ... at this generation */
  perf__modules_t *mods;                /* ... with this snapshot (a reference), or NULL */
  uint32_t *module_cache;               /* per map module: 1-based batch module, 0 unknown */
  size_t module_cache_len;
  pc_slot_t *pc_cache;
  size_t pc_cap, pc_count;
  uint32_t pc_gen;
  uint32_t scratch[PERF__EVENT_MAX_DEPTH];
  uint32_t *stack_map; /* event stack -> 1-based batch stack */
  size_t stack_map_cap;
  /* "syscall N" for the calls of one event sample_state.c has no name for
     (the first UNNAMED_MAX numbers; later ones are just "syscall"). */
  char unnamed[UNNAMED_MAX][24];
  long unnamed_nr[UNNAMED_MAX];
  size_t unnamed_count;
};

static int use_caches(perf__event_encoder_t *enc, const perf__batch_builder_t *b,
                      perf__modules_t *mods);
static void empty_caches(perf__event_encoder_t *enc);
static int encode_stacks(perf__event_encoder_t *enc, perf__batch_builder_t *b,
                         const perf__event_t *ev);
static int live_frame(perf__event_encoder_t *enc, perf__batch_builder_t *b, uintptr_t pc, bool ret,
                      uint32_t *out);
static int name_frame(perf__batch_builder_t *b, const perf__frame_info_t *fi,
                      perf__batch_frame_t *k, perf__batch_line_t *lines);
static pc_slot_t *pc_slot(perf__event_encoder_t *enc, uint64_t key);
static int grow_pc_cache(perf__event_encoder_t *enc);
static int describe(perf__event_encoder_t *enc, const perf__event_t *ev, perf__batch_event_t *out);
static const char *syscall_name(perf__event_encoder_t *enc, perf__sample_state_t state);

perf__event_encoder_t *perf__event_encoder_new(void) {
  perf__event_encoder_t *enc = calloc(1, sizeof *enc);
  if (enc) enc->pc_gen = 1; /* calloc'd slots (gen 0) are empty */
  return enc;
}

void perf__event_encoder_free(perf__event_encoder_t *enc) {
  if (!enc) return;
  perf__modules_release(enc->mods);
  free(enc->module_cache);
  free(enc->pc_cache);
  free(enc->stack_map);
  free(enc);
}

int perf__event_encode(perf__event_encoder_t *enc, perf__batch_builder_t *b,
                       const perf__event_t *ev) {
  if (!enc || !b || !ev) return PERF_E_INVALID_ARGUMENT;
  perf__batch_begin_event(b);
  int err = ev->stack_count ? use_caches(enc, b, ev->mods) : PERF_OK;
  if (!err) err = encode_stacks(enc, b, ev);
  if (err) return perf__batch_abort_event(b, err);
  perf__batch_event_t d;
  if ((err = describe(enc, ev, &d)) != 0) return perf__batch_abort_event(b, err);
  err = perf__batch_add_event(b, &d);
  free((void *)d.threads);
  free((void *)d.counts);
  free((void *)d.samples);
  free((void *)d.count_weights_ns);
  free((void *)d.count_states);
  return err;
}

void perf__config_batch_resource(const perf__config_t *cfg, perf__batch_resource_t *out) {
  memset(out, 0, sizeof *out);
  out->app_name = cfg->app_name;
  out->app_version = cfg->app_version;
  out->environment = cfg->environment;
  out->tag_count = cfg->tag_count < PERF_MAX_TAGS ? cfg->tag_count : PERF_MAX_TAGS;
  for (size_t i = 0; i < out->tag_count; i++) {
    out->tags[i].key = cfg->tags[i].key;
    out->tags[i].value = cfg->tags[i].value;
  }
}

/* Make the caches describe builder b as it is now, with snapshot `mods`. */
static int use_caches(perf__event_encoder_t *enc, const perf__batch_builder_t *b,
                      perf__modules_t *mods) {
  bool same = enc->builder == b && enc->generation == perf__batch_generation(b) &&
              enc->mods == mods && enc->module_cache;
  if (same) return PERF_OK;
  size_t n = mods ? mods->map->count : 0;
  uint32_t *c = realloc(enc->module_cache, (n ? n : 1) * sizeof *c);
  if (!c) return PERF_E_NO_MEMORY;
  enc->module_cache = c;
  if (mods) atomic_fetch_add(&mods->refs, 1);
  perf__modules_release(enc->mods);
  enc->mods = mods;
  enc->module_cache_len = n;
  enc->builder = b;
  enc->generation = perf__batch_generation(b);
  empty_caches(enc);
  return PERF_OK;
}

static void empty_caches(perf__event_encoder_t *enc) {
  if (enc->module_cache && enc->module_cache_len)
    memset(enc->module_cache, 0, enc->module_cache_len * sizeof *enc->module_cache);
  enc->pc_count = 0;
  if (++enc->pc_gen == 0) { /* wrapped: really empty the slots */
    if (enc->pc_cache) memset(enc->pc_cache, 0, enc->pc_cap * sizeof *enc->pc_cache);
    enc->pc_gen = 1;
  }
}

/* Every stack of the event interned; enc->stack_map[i] is stack i's. */
static int encode_stacks(perf__event_encoder_t *enc, perf__batch_builder_t *b,
                         const perf__event_t *ev) {
  size_t ns = ev->stack_count;
  if (ns > enc->stack_map_cap) {
    uint32_t *m = realloc(enc->stack_map, ns * sizeof *m);
    if (!m) return PERF_E_NO_MEMORY;
    enc->stack_map = m;
    enc->stack_map_cap = ns;
  }
  for (size_t i = 0; i < ns; i++) {
    const perf__stack_t *s = &ev->stacks[i];
    uint32_t depth = s->depth < PERF__EVENT_MAX_DEPTH ? s->depth : PERF__EVENT_MAX_DEPTH;
    for (uint32_t f = 0; f < depth; f++) {
      int err = live_frame(enc, b, ev->frames[s->first + f], f > 0, &enc->scratch[f]);
      if (err) return err;
    }
    int err = perf__batch_intern_stack(b, enc->scratch, depth, (Perf__V1__StackEnd)s->end,
                                       &enc->stack_map[i]);
    if (err) return err;
  }
  return PERF_OK;
}

/* 1-based frame of a pc captured in this process, named from the cached
   snapshot (NULL: no module known). */
static int live_frame(perf__event_encoder_t *enc, perf__batch_builder_t *b, uintptr_t pc, bool ret,
                      uint32_t *out) {
  int err = enc->pc_count * 2 >= enc->pc_cap ? grow_pc_cache(enc) : PERF_OK;
  if (err) return err;
  uint64_t key = (uint64_t)pc * 2 + ret;
  pc_slot_t *slot = pc_slot(enc, key);
  if (slot->gen == enc->pc_gen) {
    *out = slot->frame;
    return PERF_OK;
  }
  perf__modules_t *mods = enc->mods;
  perf__batch_line_t lines[PERF__SYM_MAX_LINES];
  perf__batch_frame_t k = {0, 0, pc, 0, 0, NULL, 0};
  const perf__module_t *m = mods ? perf__module_map_find(mods->map, ret ? pc - 1 : pc) : NULL;
  if (m) {
    size_t mi = (size_t)(m - mods->map->modules);
    k.address = pc - m->bias;
    if (!enc->module_cache[mi]) {
      perf__batch_module_t bm = {m->path, m->build_id,        m->build_id_len,
                                 m->bias, m->start - m->bias, m->end - m->bias,
                                 false,   m->executable};
      if ((err = perf__batch_intern_module(b, &bm, &enc->module_cache[mi])) != 0) return err;
    }
    k.module = enc->module_cache[mi];
  }
  if (perf__batch_symbolized(b) && mods) {
    perf__frame_info_t fi;
    perf__modules_symbolize(mods, pc, ret, &fi);
    if ((err = name_frame(b, &fi, &k, lines)) != 0) return err;
  }
  uint32_t frame;
  if ((err = perf__batch_intern_frame(b, &k, &frame)) != 0) return err;
  /* The slot is still free: nothing entered the cache meanwhile. */
  *slot = (pc_slot_t){key, frame, enc->pc_gen};
  enc->pc_count++;
  *out = frame;
  return PERF_OK;
}

static int intern_function(perf__batch_builder_t *b, const perf__sym_line_t *l, uint32_t *out) {
  perf__batch_function_t f = {l->function, strlen(l->function), l->linkage,
                              l->linkage ? strlen(l->linkage) : 0};
  return perf__batch_intern_function(b, &f, out);
}

/* The frame's function and offset, and, when DWARF named it, its lines:
   the inline chain innermost first, the physical function last. */
static int name_frame(perf__batch_builder_t *b, const perf__frame_info_t *fi,
                      perf__batch_frame_t *k, perf__batch_line_t *lines) {
  const perf__sym_frame_t *s = &fi->sym;
  if (s->count == 0) return PERF_OK;
  int err = intern_function(b, &s->lines[s->count - 1], &k->function);
  k->function_offset = s->offset;
  for (size_t i = 0; i < s->count && s->from_dwarf && !err; i++) {
    const perf__sym_line_t *l = &s->lines[i];
    lines[i] = (perf__batch_line_t){0, 0, l->line, l->column};
    err = intern_function(b, l, &lines[i].function);
    if (!err && l->file)
      err = perf__batch_intern_string(b, l->file, strlen(l->file), &lines[i].file);
  }
  if (!err && s->from_dwarf) {
    k->lines = lines;
    k->line_count = s->count;
  }
  return err;
}

/* The slot holding key, or the free slot where it would go. */
static pc_slot_t *pc_slot(perf__event_encoder_t *enc, uint64_t key) {
  size_t j = perf__mix64(key) & (enc->pc_cap - 1);
  while (enc->pc_cache[j].gen == enc->pc_gen && enc->pc_cache[j].key != key)
    j = (j + 1) & (enc->pc_cap - 1);
  return &enc->pc_cache[j];
}

/* Double the pc cache (load kept at most one half). */
static int grow_pc_cache(perf__event_encoder_t *enc) {
  size_t cap = enc->pc_cap ? enc->pc_cap * 2 : 1024;
  pc_slot_t *fresh = calloc(cap, sizeof *fresh);
  if (!fresh) return PERF_E_NO_MEMORY;
  for (size_t i = 0; i < enc->pc_cap; i++) {
    pc_slot_t s = enc->pc_cache[i];
    if (s.gen != enc->pc_gen) continue;
    size_t j = perf__mix64(s.key) & (cap - 1);
    while (fresh[j].gen == enc->pc_gen)
      j = (j + 1) & (cap - 1);
    fresh[j] = s;
  }
  free(enc->pc_cache);
  enc->pc_cache = fresh;
  enc->pc_cap = cap;
  return PERF_OK;
}

static Perf__V1__EventKind wire_kind(perf__event_kind_t kind) {
  switch (kind) {
  case PERF__EVENT_HANG: return PERF__V1__EVENT_KIND__EVENT_KIND_HANG;
  case PERF__EVENT_FATAL_HANG: return PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG;
  case PERF__EVENT_CPU: return PERF__V1__EVENT_KIND__EVENT_KIND_CPU;
  case PERF__EVENT_MANUAL: return PERF__V1__EVENT_KIND__EVENT_KIND_MANUAL;
  case PERF__EVENT_PROFILE: return PERF__V1__EVENT_KIND__EVENT_KIND_PROFILE;
  }
  return PERF__V1__EVENT_KIND__EVENT_KIND_UNSPECIFIED;
}

/* The event in the builder's terms (threads, counts, samples and a
   profile's count weights and states malloc'd; the caller frees them). */
static int describe(perf__event_encoder_t *enc, const perf__event_t *ev, perf__batch_event_t *out) {
  perf__batch_thread_t *threads = calloc(ev->thread_count + 1, sizeof *threads);
  perf__batch_count_t *counts = calloc(ev->stack_count + 1, sizeof *counts);
  perf__batch_sample_t *samples = calloc(ev->sample_count + 1, sizeof *samples);
  enc->unnamed_count = 0;
  out->count_weights_ns = NULL;
  out->count_states = NULL;
  if (!threads || !counts || !samples) {
    free(threads);
    free(counts);
    free(samples);
    return PERF_E_NO_MEMORY;
  }
  for (size_t i = 0; i < ev->thread_count; i++) {
    const perf__thread_t *t = &ev->threads[i];
    threads[i] = (perf__batch_thread_t){(uint32_t)t->tid, t->name, strnlen(t->name, sizeof t->name),
                                        t->cpu_percent};
  }
  for (size_t i = 0; i < ev->stack_count; i++)
    counts[i] = (perf__batch_count_t){enc->stack_map[i], (uint32_t)ev->stacks[i].tid,
                                      ev->stacks[i].samples};
  /* A profile's counts carry their CPU time and state (it has no samples). */
  if (ev->kind == PERF__EVENT_PROFILE) {
    uint64_t *weights = calloc(ev->stack_count + 1, sizeof *weights);
    uint8_t *states = calloc(ev->stack_count + 1, sizeof *states);
    if (!weights || !states) {
      free(weights);
      free(states);
      free(threads);
      free(counts);
      free(samples);
      return PERF_E_NO_MEMORY;
    }
    for (size_t i = 0; i < ev->stack_count; i++) {
      weights[i] = ev->stacks[i].weight_ns;
      states[i] = (uint8_t)ev->stacks[i].state;
    }
    out->count_weights_ns = weights;
    out->count_states = states;
  }
  for (size_t i = 0; i < ev->sample_count; i++) {
    const perf__sample_t *s = &ev->samples[i];
    bool ok = s->stack >= 0 && (size_t)s->stack < ev->stack_count;
    samples[i] = (perf__batch_sample_t){
        s->mono_ns,     (uint32_t)s->tid, ok ? enc->stack_map[s->stack] : 0, s->error,
        s->state.state, s->state.fd_kind, syscall_name(enc, s->state),       s->weight_ns};
  }
  *out = (perf__batch_event_t){wire_kind(ev->kind),
                               ev->start_wall_ns,
                               ev->start_mono_ns,
                               ev->duration_ns,
                               (uint32_t)ev->tid,
                               ev->cpu_percent,
                               ev->reason,
                               ev->label,
                               ev->samples_over,
                               threads,
                               ev->thread_count,
                               counts,
                               ev->stack_count,
                               samples,
                               ev->sample_count,
                               ev->weighted,
                               ev->loop,
                               out->count_weights_ns,
                               out->count_states};
  return PERF_OK;
}

/* The name a sample's system call goes out with: NULL when running or
   unknown, the table's name, or "syscall N". */
static const char *syscall_name(perf__event_encoder_t *enc, perf__sample_state_t state) {
  if (state.state <= PERF__STATE_RUNNING || state.syscall < 0) return NULL;
  const char *name = perf__syscall_name(state.syscall);
  if (name) return name;
  for (size_t i = 0; i < enc->unnamed_count; i++)
    if (enc->unnamed_nr[i] == state.syscall) return enc->unnamed[i];
  if (enc->unnamed_count == UNNAMED_MAX) return "syscall";
  size_t i = enc->unnamed_count++;
  enc->unnamed_nr[i] = state.syscall;
  perf__syscall_label(state.syscall, enc->unnamed[i], sizeof enc->unnamed[i]);
  return enc->unnamed[i];
}
