/*
 * ingest.c - decode and store one batch (see ingest.h). A stack's frames
 * are stored as frame_json.h says: the device's names, linkage names and
 * inline chains (Frame.lines), unless a local debug file of the frame's
 * module (by build-id, symbolize.h) names it: then the collector's answer
 * replaces the device's. A stack that ended early (Stack.end) gets a last
 * "<truncated: reason>" frame. Its signature is perf__signature_hash
 * (signature.h) of its frame labels, expanded (inline frames, the end
 * marker), innermost first. The build-ids without a file are handed to the
 * resymbolizer after the batch is stored, which fetches them in the
 * background and renames the stored stacks. Groups (the
 * top-stacks API): every stack is one, and a hang event gets the majority
 * key of its samples (hang_key.h), which the store matches against its hang
 * groups (sqlite_hang_groups.h).
 */
#include "collector/ingest/ingest.h"

#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "collector/base/log.h"
#include "collector/ingest/batch_limits.h"
#include "collector/ingest/batch_loops.h"
#include "collector/ingest/decode_arena.h"
#include "collector/ingest/profile_check.h"
#include "collector/ingest/sample_states.h"
#include "collector/ingest/stack_cache.h"
#include "collector/model/frame_json.h"
#include "collector/model/hang_key.h"
#include "collector/model/signature.h"
#include "collector/symbols/symbol_files.h"
#include "perf_sdk.h"
#include "sdk/base/frame_text.h"
#include "sdk/base/utf8.h"
#include "sdk/wire/batch_decode.h"
#include "sdk/wire/event_weights.h"

static void set_result(ingest_result_t *r, unsigned status, reject_reason_t why, const char *fmt,
                       ...) {
  r->status = status;
  r->reason = why;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(r->message, sizeof r->message, fmt, ap);
  va_end(ap);
}

static int64_t wall_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static const char *event_kind(Perf__V1__EventKind k) {
  switch (k) {
  case PERF__V1__EVENT_KIND__EVENT_KIND_HANG: return "hang";
  case PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG: return "fatal_hang";
  case PERF__V1__EVENT_KIND__EVENT_KIND_CPU: return "cpu";
  case PERF__V1__EVENT_KIND__EVENT_KIND_MANUAL: return "manual";
  case PERF__V1__EVENT_KIND__EVENT_KIND_PROFILE: return "profile";
  default: return "unspecified";
  }
}

/* ---- stacks: signature and frames JSON ---------------------------------- */

static const char *function_name(const Perf__V1__Batch *bt, uint32_t function) {
  if (function == 0) return NULL;
  uint32_t s = bt->functions[function - 1]->name;
  return s && bt->strings[s][0] ? bt->strings[s] : NULL;
}

static const char *system_name(const Perf__V1__Batch *bt, uint32_t function) {
  if (function == 0) return NULL;
  uint32_t s = bt->functions[function - 1]->system_name;
  return s && bt->strings[s][0] ? bt->strings[s] : NULL;
}

#define MAX_UNRESOLVED 16 /* build-ids per batch handed to the resymbolizer */

/* What a batch's frames need beyond the batch itself. */
typedef struct frame_ctx_s {
  const Perf__V1__Batch *bt;
  symbolizer_t *symbols;
  char unresolved[MAX_UNRESOLVED][SYMBOL_ID_MAX_HEX + 1]; /* build-ids without a debug file */
  size_t n_unresolved;
  uint64_t named, unnamed; /* frames the device did not name, named here or not */
  stack_built_t *building; /* the stack being built: its build-ids without a debug file */
  bool overflow;           /* more of them than it keeps */
  stack_cache_t *cache;    /* built stacks by input (may be NULL) */
  symbol_t sym;            /* one lookup's answer */
  char unusable[SYMBOL_ID_MAX_HEX + 1]; /* a build-id whose answer could not be stored */
  uint64_t n_unusable;                  /* frames kept as the device named them for that */
  struct frame_key_s *frame_keys;       /* per frame of bt, its part of a stack's key, once made */
} frame_ctx_t;

static void hex_of(const uint8_t *bytes, size_t n, char *out) {
  static const char DIGITS[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = DIGITS[bytes[i] >> 4];
    out[2 * i + 1] = DIGITS[bytes[i] & 15];
  }
  out[2 * n] = '\0';
}

static void note_unresolved(frame_ctx_t *fc, const char *id) {
  for (size_t i = 0; i < fc->n_unresolved; i++)
    if (strcmp(fc->unresolved[i], id) == 0) return;
  if (fc->n_unresolved < MAX_UNRESOLVED)
    snprintf(fc->unresolved[fc->n_unresolved++], sizeof fc->unresolved[0], "%s", id);
}

static void note_stack_unresolved(frame_ctx_t *fc, const char *id) {
  stack_built_t *b = fc->building;
  if (!b) return;
  for (size_t i = 0; i < b->n_unresolved; i++)
    if (strcmp(b->unresolved[i], id) == 0) return;
  if (b->n_unresolved == STACK_CACHE_UNRESOLVED || strlen(id) >= sizeof b->unresolved[0]) {
    fc->overflow = true;
    return;
  }
  snprintf(b->unresolved[b->n_unresolved++], sizeof b->unresolved[0], "%s", id);
}

/* A frame of a module with a build-id, named by the device or not:
   symbolized from a local debug file (return addresses, depth > 0, at
   address - 1); the collector's answer replaces the device's. True when
   the debug file named it. */
static bool symbolize_frame(frame_ctx_t *fc, json_t *o, uint64_t address, size_t depth,
                            const char *id) {
  if (!fc->symbols || !id[0]) return false;
  uint64_t ret = depth && address ? 1 : 0;
  int rc = symbolizer_lookup(fc->symbols, id, address - ret, &fc->sym);
  if (rc == SYMBOLIZE_NO_FILE) {
    note_unresolved(fc, id);
    note_stack_unresolved(fc, id);
  }
  if (rc != SYMBOLIZE_FOUND) return false;
  if (frame_json_set_symbol(o, &fc->sym, ret) == 0) return true;
  /* The frame stays as the device named it (set_symbol left it so): one
     debug file's bad answer never refuses the batch. */
  snprintf(fc->unusable, sizeof fc->unusable, "%s", id);
  fc->n_unusable++;
  return false;
}

/* A line of the device's chain (Frame.lines) set on o: function, linkage
   name, file:line. */
static int set_device_line(const Perf__V1__Batch *bt, json_t *o, const Perf__V1__Line *l,
                           bool name) {
  const char *fn = function_name(bt, l->function), *sys = system_name(bt, l->function);
  const char *file = l->file && bt->strings[l->file][0] ? bt->strings[l->file] : NULL;
  int err = 0;
  if (name) err |= json_object_set_new(o, "function", json_string(fn ? fn : "??"));
  if (name && sys) err |= json_object_set_new(o, "system_name", json_string(sys));
  if (file && l->line)
    err |= json_object_set_new(o, "file", json_string(file)) |
           json_object_set_new(o, "line", json_integer(l->line));
  return err;
}

/* The device's inline chain and lines of f on o (frame_json.h's form). */
static int set_device_lines(const Perf__V1__Batch *bt, json_t *o, const Perf__V1__Frame *f) {
  if (!f->n_lines) return 0;
  int err = set_device_line(bt, o, f->lines[f->n_lines - 1], false);
  json_t *inlined = f->n_lines > 1 ? json_array() : NULL;
  for (size_t i = 0; inlined && i + 1 < f->n_lines; i++) {
    json_t *l = json_object();
    err |= !l || set_device_line(bt, l, f->lines[i], true) != 0 ? -1 : 0;
    err |= json_array_append_new(inlined, l);
  }
  if (f->n_lines > 1) err |= inlined ? json_object_set_new(o, "inlined", inlined) : -1;
  return err;
}

/* One frame at depth (0: innermost) of a stack as stored (frame_json.h). */
static json_t *frame_json(frame_ctx_t *fc, uint32_t index, size_t depth) {
  const Perf__V1__Batch *bt = fc->bt;
  const Perf__V1__Frame *f = bt->frames[index - 1];
  const Perf__V1__Module *m = f->module ? bt->modules[f->module - 1] : NULL;
  const char *module = m ? m->path : "??";
  const char *fn = function_name(bt, f->function), *sys = system_name(bt, f->function);
  char id[SYMBOL_ID_MAX_HEX + 1] = "";
  if (m && m->build_id.len && m->build_id.len * 2 <= SYMBOL_ID_MAX_HEX)
    hex_of(m->build_id.data, m->build_id.len, id);
  char address[24];
  snprintf(address, sizeof address, "0x%llx", (unsigned long long)f->address);
  json_t *o = json_pack("{s:s?, s:s, s:s, s:I}", "function", fn, "module", module, "address",
                        address, "offset", (json_int_t)(fn ? f->function_offset : 0));
  if (!o) return NULL;
  int err = 0;
  if (id[0]) err |= json_object_set_new(o, "build_id", json_string(id));
  if (m && m->executable) err |= json_object_set_new(o, "executable", json_true());
  if (fn && sys) err |= json_object_set_new(o, "system_name", json_string(sys));
  if (fn) err |= set_device_lines(bt, o, f);
  bool here = !err && symbolize_frame(fc, o, f->address, depth, id);
  if (!fn && here)
    fc->named++;
  else if (!fn)
    fc->unnamed++;
  if (err) json_decref(o);
  return err ? NULL : o;
}

/* The frames as stored: one object per frame, then the end marker of a
   stack that ended early. */
static json_t *stack_frames(frame_ctx_t *fc, const Perf__V1__Stack *s) {
  json_t *frames = json_array();
  for (size_t i = 0; frames && i < s->n_frames; i++)
    if (json_array_append_new(frames, frame_json(fc, s->frames[i], i)) != 0) {
      json_decref(frames);
      return NULL;
    }
  json_t *end = frame_json_end((int)s->end);
  if (frames && end && json_array_append_new(frames, end) != 0) {
    json_decref(frames);
    return NULL;
  }
  return frames;
}

/* The stack's row built: frames as JSON, labels (inline frames and the end
   marker are frames), signature, group names; fc's counts moved by its
   frames. */
static int build_fresh(frame_ctx_t *fc, const Perf__V1__Stack *s, stack_built_t *out) {
  json_t *frames = stack_frames(fc, s);
  json_t *labels = frames ? frame_json_labels(frames) : NULL;
  out->frames_json = labels ? json_dumps(frames, JSON_COMPACT) : NULL;
  json_decref(frames);
  size_t n = json_array_size(labels);
  out->labels = calloc(n ? n : 1, sizeof *out->labels);
  uint64_t h = PERF__SIGNATURE_START;
  for (size_t i = 0; out->labels && out->frames_json && i < n; i++) {
    const char *label = json_string_value(json_array_get(labels, i));
    if (!(out->labels[i] = strdup(label))) break;
    out->depth = i + 1;
    h = perf__signature_add(h, label);
  }
  out->names_json = labels && out->depth == n ? json_dumps(labels, JSON_COMPACT) : NULL;
  json_decref(labels);
  snprintf(out->signature, sizeof out->signature, "%016llx", (unsigned long long)h);
  return out->frames_json && out->labels && out->names_json ? 0 : -1;
}

/* The stack's row again without the debug files, as the device named its
   frames, when building it with their answers failed: what a debug file
   says can never keep a batch from being stored. Logged. */
static int build_unnamed(frame_ctx_t *fc, const Perf__V1__Stack *s, stack_built_t *out) {
  stack_built_release(out);
  symbolizer_t *symbols = fc->symbols;
  fc->symbols = NULL;
  int rc = build_fresh(fc, s, out);
  fc->symbols = symbols;
  collector_log("a stack could not be stored with its debug files' names; %s\n",
                rc == 0 ? "stored as the device named it"
                        : "nor as the device named it (out of memory)");
  fc->overflow = true; /* not cached: the next batch tries the debug files again */
  return rc;
}

/* The stack cache's key: 128 bits over everything build_fresh reads. */
typedef struct key_hash_s {
  uint64_t a, b;
} key_hash_t;

/* One word into both halves, each step a bijection of the half for a
   given word (so two inputs differing in one word never meet), its high
   bits folded down (a product carries no high bit of its factors to its
   low bits). A word at a time: a byte at a time, hashing the texts takes
   a twentieth of ingest's CPU. */
static void key_u64(key_hash_t *k, uint64_t w) {
  k->a = (k->a ^ w) * UINT64_C(0x9e3779b97f4a7c15);
  k->a ^= k->a >> 32;
  k->b = (k->b ^ w) * UINT64_C(0xff51afd7ed558ccd);
  k->b = k->b << 31 | k->b >> 33;
}

/* n bytes, 8 at a time, the last word padded with zeros (callers hash
   the length first). */
static void key_bytes(key_hash_t *k, const void *p, size_t n) {
  const unsigned char *c = p;
  for (; n >= 8; c += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, c, 8);
    key_u64(k, w);
  }
  if (n) {
    uint64_t w = 0;
    memcpy(&w, c, n);
    key_u64(k, w);
  }
}

static void key_text(key_hash_t *k, const char *t) {
  size_t n = t ? strlen(t) : SIZE_MAX;
  key_u64(k, n);
  if (t) key_bytes(k, t, n);
}

/* A frame's part of the key, made once per batch for a frame that many
   of its stacks share (hashing each frame's texts again for every stack
   was a tenth of ingest's CPU). */
typedef struct frame_key_s {
  key_hash_t k;
  bool made;
} frame_key_t;

static key_hash_t frame_key(const Perf__V1__Batch *bt, uint32_t index) {
  key_hash_t k = {UINT64_C(0x84222325cbf29ce4), UINT64_C(0xcbf29ce484222325)};
  const Perf__V1__Frame *f = bt->frames[index - 1];
  const Perf__V1__Module *m = f->module ? bt->modules[f->module - 1] : NULL;
  key_text(&k, m ? m->path : NULL);
  key_u64(&k, m ? m->build_id.len : 0);
  key_u64(&k, m && m->executable);
  if (m) key_bytes(&k, m->build_id.data, m->build_id.len);
  key_u64(&k, f->address);
  key_u64(&k, f->function_offset);
  key_text(&k, function_name(bt, f->function));
  key_text(&k, system_name(bt, f->function));
  key_u64(&k, f->n_lines);
  for (size_t l = 0; l < f->n_lines; l++) {
    key_text(&k, function_name(bt, f->lines[l]->function));
    key_text(&k, system_name(bt, f->lines[l]->function));
    key_text(&k, f->lines[l]->file ? bt->strings[f->lines[l]->file] : NULL);
    key_u64(&k, f->lines[l]->line);
  }
  return k;
}

static void stack_key(frame_ctx_t *fc, const Perf__V1__Stack *s, uint64_t key[2]) {
  const Perf__V1__Batch *bt = fc->bt;
  if (!fc->frame_keys) fc->frame_keys = calloc(bt->n_frames + 1, sizeof *fc->frame_keys);
  key_hash_t k = {UINT64_C(0xcbf29ce484222325), UINT64_C(0x84222325cbf29ce4)};
  key_u64(&k, s->n_frames);
  key_u64(&k, (uint64_t)s->end);
  for (size_t i = 0; i < s->n_frames; i++) {
    uint32_t index = s->frames[i];
    frame_key_t one = {0}, *fk = fc->frame_keys ? &fc->frame_keys[index - 1] : &one;
    if (!fk->made) fk->k = frame_key(bt, index), fk->made = true;
    key_u64(&k, fk->k.a);
    key_u64(&k, fk->k.b);
  }
  key[0] = k.a;
  key[1] = k.b;
}

/* Whether the build-ids a cached row's frames found no debug file for
   still have none: then building the row again would make the same row. */
static bool still_missing(frame_ctx_t *fc, const stack_built_t *b) {
  for (size_t i = 0; i < b->n_unresolved; i++)
    if (!fc->symbols || symbolizer_available(fc->symbols, b->unresolved[i])) return false;
  return true;
}

/* The stack's row (from the cache when it holds it: shared, not copied),
   its frame labels and its group (the same signature, the labels as
   JSON), all borrowed from *held, a reference the caller drops. */
static int build_stack(frame_ctx_t *fc, const Perf__V1__Stack *s, store_stack_t *out,
                       perf__named_stack_t *named, store_group_t *group, stack_built_t **held) {
  named->frames = NULL;
  named->depth = 0;
  uint64_t key[2], generation = fc->symbols ? symbolizer_generation(fc->symbols) : 0;
  double now = symbolizer_now_s();
  stack_key(fc, s, key);
  stack_built_t *b = stack_cache_get(fc->cache, key, generation, now);
  if (!b && (b = stack_cache_get_due(fc->cache, key, generation))) {
    if (still_missing(fc, b)) {
      stack_cache_renew(fc->cache, key, b, now + SYMBOLIZER_MISSING_RECHECK_S);
    } else {
      stack_built_unref(b);
      b = NULL;
    }
  }
  if (b) {
    fc->named += b->named;
    fc->unnamed += b->unnamed;
    for (size_t i = 0; i < b->n_unresolved; i++)
      note_unresolved(fc, b->unresolved[i]);
  } else {
    if (!(b = stack_built_new())) return -1;
    uint64_t named0 = fc->named, unnamed0 = fc->unnamed;
    fc->building = b;
    fc->overflow = false;
    int rc = build_fresh(fc, s, b);
    if (rc != 0 && fc->symbols) {
      fc->named = named0;
      fc->unnamed = unnamed0;
      rc = build_unnamed(fc, s, b);
    }
    fc->building = NULL;
    b->named = (uint32_t)(fc->named - named0);
    b->unnamed = (uint32_t)(fc->unnamed - unnamed0);
    if (rc != 0) {
      stack_built_unref(b);
      return -1;
    }
    /* A stack with a module without a debug file: good as long as the
       symbolizer keeps that file missing. */
    if (!fc->overflow)
      stack_cache_put(fc->cache, key, generation,
                      b->n_unresolved ? now + SYMBOLIZER_MISSING_RECHECK_S : 0, b);
  }
  *held = b;
  named->frames = (const char *const *)b->labels;
  named->depth = b->depth;
  out->frames_json = b->frames_json;
  out->end = s->end == 0 || s->end == 1 ? NULL : perf__stack_end_text((int)s->end);
  group->names_json = b->names_json;
  memcpy(out->signature, b->signature, sizeof out->signature);
  memcpy(group->signature, b->signature, sizeof group->signature);
  return 0;
}

/* ---- the store record --------------------------------------------------- */

typedef struct record_s {
  store_batch_t batch;
  store_stack_t *stacks;
  store_event_t *events;
  store_stack_count_t **counts; /* per event */
  store_state_count_t **states; /* per event: its samples per thread and state */
  perf__named_stack_t *named;   /* per stack: its frame labels */
  stack_built_t **built;        /* per stack: the row stacks, named and groups borrow from */
  store_group_t *groups;        /* one per stack */
  store_hang_t *hangs;          /* per event: hang events' grouping input */
  store_tag_t *tags;            /* the resource's */
  store_loop_stats_t loop;      /* batch.loop_stats points here when the batch had them */
  store_named_loop_t loops[STORE_MAX_LOOPS]; /* batch.loops: Batch.loops (check_batch) */
  size_t cap_stacks, cap_groups, cap_events;
  uint64_t samples;
  frame_ctx_t frames;
} record_t;

static void record_free(record_t *r) {
  for (size_t i = 0; r->built && i < r->cap_stacks; i++)
    stack_built_unref(r->built[i]);
  free(r->built);
  for (size_t i = 0; r->hangs && i < r->cap_events; i++) {
    hang_key_release(&r->hangs[i]);
    free((void *)r->hangs[i].samples.stacks);
    free((void *)r->hangs[i].samples.samples);
  }
  free(r->hangs);
  free(r->frames.frame_keys);
  free(r->tags);
  free(r->named);
  free(r->groups);
  for (size_t i = 0; r->counts && i < r->batch.n_events; i++)
    free(r->counts[i]);
  for (size_t i = 0; r->states && i < r->cap_events; i++)
    free(r->states[i]);
  free(r->states);
  free(r->stacks);
  free(r->events);
  free(r->counts);
}

/* A hang event's grouping input: its sampled stacks (labels and samples)
   and their majority key (hang_key.h); the store picks the group. */
static int hang_group(record_t *r, const Perf__V1__Event *pe, size_t index) {
  store_hang_t *h = &r->hangs[index];
  perf__named_stack_t *stacks = calloc(pe->n_stack_counts, sizeof *stacks);
  uint64_t *samples = calloc(pe->n_stack_counts, sizeof *samples);
  h->samples = (perf__hang_samples_t){stacks, samples, 0};
  if (!stacks || !samples) return -1;
  size_t n = 0, fallback = 0;
  for (size_t i = 0; i < pe->n_stack_counts; i++) {
    const Perf__V1__StackCount *c = pe->stack_counts[i];
    if (c->samples == 0) continue;
    if (c->stack == pe->dominant_stack) fallback = n;
    stacks[n] = r->named[c->stack - 1];
    samples[n++] = c->samples;
  }
  h->samples.n = n;
  if (n == 0) return 0; /* nothing sampled: no group */
  if (hang_key_make(h, fallback) != 0) return -1;
  r->events[index].hang = h;
  return 0;
}

static int cmp_count(const void *x, const void *y) {
  const store_stack_count_t *a = *(const store_stack_count_t *const *)x;
  const store_stack_count_t *b = *(const store_stack_count_t *const *)y;
  int c = strcmp(a->stack_sig, b->stack_sig);
  if (c) return c;
  if (a->tid != b->tid) return a->tid < b->tid ? -1 : 1;
  return (a > b) - (a < b); /* the first of equals first */
}

/* An event's counts made one per signature and thread, in place, in their
   order: the SDK's stacks are its distinct pcs, and stacks whose frames
   differ only in addresses inside the same functions share a signature
   (signature.h: frames are labelled by function), so the first count of a
   signature on a thread takes the samples and CPU time of the others.
   Returns the counts left; SIZE_MAX when memory ran out. */
static size_t merge_counts(store_stack_count_t *c, size_t n) {
  if (n < 2) return n;
  store_stack_count_t **by_key = malloc(n * sizeof *by_key);
  if (!by_key) return SIZE_MAX;
  for (size_t i = 0; i < n; i++)
    by_key[i] = &c[i];
  qsort(by_key, n, sizeof *by_key, cmp_count);
  for (size_t i = 1, first = 0; i < n; i++) {
    store_stack_count_t *keep = by_key[first], *dup = by_key[i];
    if (strcmp(keep->stack_sig, dup->stack_sig) != 0 || keep->tid != dup->tid) {
      first = i;
      continue;
    }
    keep->samples =
        dup->samples > UINT32_MAX - keep->samples ? UINT32_MAX : keep->samples + dup->samples;
    if (keep->cpu_us >= 0 && dup->cpu_us >= 0) keep->cpu_us += dup->cpu_us;
    dup->stack_sig = NULL;
  }
  free(by_key);
  size_t kept = 0;
  for (size_t i = 0; i < n; i++)
    if (c[i].stack_sig) c[kept++] = c[i];
  return kept;
}

/* The loop a hang came from: its name, or "main" when the SDK named none
   (an SDK that watched one loop only watched the main loop). Other kinds
   are no loop's. */
static const char *event_loop(const Perf__V1__Event *pe) {
  if (pe->loop && pe->loop[0]) return pe->loop;
  bool hang = pe->kind == PERF__V1__EVENT_KIND__EVENT_KIND_HANG ||
              pe->kind == PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG;
  return hang ? "main" : NULL;
}

static int build_event(record_t *r, const Perf__V1__Event *pe, size_t index) {
  store_event_t *e = &r->events[index];
  e->kind = event_kind(pe->kind);
  e->start_ns = pe->start_unix_nanos;
  e->duration_ns = pe->duration_nanos;
  e->tid = pe->tid;
  e->cpu_percent = pe->cpu_percent;
  e->reason = pe->reason;
  e->label = pe->label;
  e->loop = event_loop(pe);
  e->dominant_stack_sig = pe->dominant_stack ? r->stacks[pe->dominant_stack - 1].signature : NULL;
  if (pe->n_stack_counts &&
      !(r->counts[index] = calloc(pe->n_stack_counts, sizeof(store_stack_count_t))))
    return -1;
  /* A CPU event's weights: the CPU time per count (event_weights.h); a
     profile's: each count's own (weight_micros). */
  bool profile = pe->kind == PERF__V1__EVENT_KIND__EVENT_KIND_PROFILE;
  int64_t *cpu_us = pe->n_stack_counts ? malloc(pe->n_stack_counts * sizeof *cpu_us) : NULL;
  if (pe->n_stack_counts && (!cpu_us || (!profile && perf__event_cpu_us(pe, cpu_us) != 0))) {
    free(cpu_us);
    return -1;
  }
  for (size_t i = 0; profile && i < pe->n_stack_counts; i++)
    cpu_us[i] = (int64_t)pe->stack_counts[i]->weight_micros; /* profile_check bounded it */
  for (size_t i = 0; i < pe->n_stack_counts; i++) {
    const Perf__V1__StackCount *c = pe->stack_counts[i];
    r->counts[index][i] =
        (store_stack_count_t){r->stacks[c->stack - 1].signature, c->tid, c->samples, cpu_us[i]};
    r->samples += c->samples;
  }
  free(cpu_us);
  e->counts = r->counts[index];
  e->n_counts = merge_counts(r->counts[index], pe->n_stack_counts);
  if (e->n_counts == SIZE_MAX) return -1;
  if ((profile ? sample_states_of_counts(pe, &r->states[index], &e->n_states)
               : sample_states_count(r->frames.bt, pe, &r->states[index], &e->n_states)) != 0)
    return -1;
  e->states = r->states[index];
  if (pe->kind == PERF__V1__EVENT_KIND__EVENT_KIND_HANG ||
      pe->kind == PERF__V1__EVENT_KIND__EVENT_KIND_FATAL_HANG)
    return pe->n_stack_counts ? hang_group(r, pe, index) : 0;
  return 0;
}

static uint64_t capped_drops(uint64_t n) {
  return n > STORE_MAX_DROPS ? STORE_MAX_DROPS : n;
}

/* The SDK's drop counters (a batch without them: zeros) and the
   resource's tags (check_batch counted them). */
static int record_drops_and_tags(const Perf__V1__Batch *bt, record_t *r) {
  const Perf__V1__DropCounters *d = bt->drops;
  if (d) {
    uint64_t *out = r->batch.drops;
    out[STORE_DROP_RATE_LIMITED] = capped_drops(d->rate_limited);
    out[STORE_DROP_QUEUE_FULL] = capped_drops(d->queue_full);
    out[STORE_DROP_SINK_FAILED] = capped_drops(d->sink_failed);
    out[STORE_DROP_SPOOL_QUOTA] = capped_drops(d->spool_quota);
    out[STORE_DROP_OVERSIZED] = capped_drops(d->oversized);
  }
  const Perf__V1__Resource *res = bt->resource;
  if (!res->n_tags) return 0;
  if (!(r->tags = calloc(res->n_tags, sizeof *r->tags))) return -1;
  for (size_t i = 0; i < res->n_tags; i++)
    r->tags[i] = (store_tag_t){res->tags[i]->key, res->tags[i]->value, strlen(res->tags[i]->key)};
  r->batch.tags = r->tags;
  r->batch.n_tags = res->n_tags;
  return 0;
}

/* The loops' stats: their sum and each named loop's (check_batch refused
   what cannot be stored). */
static void record_loop_stats(const Perf__V1__Batch *bt, record_t *r) {
  if (bt->loop_stats) {
    batch_loops_copy(bt->loop_stats, &r->loop);
    r->batch.loop_stats = &r->loop;
  }
  r->batch.n_loops = batch_loops_named(bt, r->loops);
  r->batch.loops = r->batch.n_loops ? r->loops : NULL;
}

static int build_record(const ingest_target_t *t, const Perf__V1__Batch *bt, record_t *r) {
  memset(r, 0, sizeof *r);
  r->frames.bt = bt;
  r->frames.symbols = t->symbols;
  r->frames.cache = t->stack_cache;
  const Perf__V1__Resource *res = bt->resource;
  memcpy(r->batch.id, bt->batch_id.data, STORE_BATCH_ID_BYTES);
  r->batch.received_ns = wall_ns();
  r->batch.app = res->app_name;
  r->batch.version = res->app_version;
  r->batch.environment = res->environment;
  r->batch.host = res->host;
  r->batch.pid = res->pid;
  if (record_drops_and_tags(bt, r) != 0) return -1;
  record_loop_stats(bt, r);
  size_t ns = bt->n_stacks, ne = bt->n_events;
  if ((ns && (!(r->stacks = calloc(ns, sizeof *r->stacks)) ||
              !(r->named = calloc(ns, sizeof *r->named)) ||
              !(r->built = calloc(ns, sizeof *r->built)))) ||
      (ne && (!(r->events = calloc(ne, sizeof *r->events)) ||
              !(r->counts = calloc(ne, sizeof *r->counts)) ||
              !(r->states = calloc(ne, sizeof *r->states)) ||
              !(r->hangs = calloc(ne, sizeof *r->hangs)))) ||
      (ns && !(r->groups = calloc(ns, sizeof *r->groups))))
    return -1;
  r->cap_stacks = ns;
  r->cap_groups = ns;
  r->cap_events = ne;
  r->batch.stacks = r->stacks;
  r->batch.events = r->events;
  r->batch.groups = r->groups;
  for (; r->batch.n_stacks < ns; r->batch.n_stacks++) {
    size_t i = r->batch.n_stacks;
    if (build_stack(&r->frames, bt->stacks[i], &r->stacks[i], &r->named[i], &r->groups[i],
                    &r->built[i]) != 0)
      return -1;
    r->batch.n_groups++;
  }
  for (; r->batch.n_events < ne; r->batch.n_events++)
    if (build_event(r, bt->events[r->batch.n_events], r->batch.n_events) != 0) return -1;
  return 0;
}

/* ---- decode, check, store ----------------------------------------------- */

static batch_limits_t g_default_limits;

static void default_limits(void) {
  batch_limits_default(&g_default_limits);
}

static const batch_limits_t *limits_of(const ingest_target_t *t) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  if (t->limits) return t->limits;
  pthread_once(&once, default_limits);
  return &g_default_limits;
}

/* The calling thread's zstd context, made at its first batch and freed
   when the thread ends (NULL when out of memory: one made per batch). */
static pthread_key_t g_dctx_key;
static bool g_dctx_keyed;

static void free_dctx(void *d) {
  ZSTD_freeDCtx(d);
}

static void make_dctx_key(void) {
  g_dctx_keyed = pthread_key_create(&g_dctx_key, free_dctx) == 0;
}

static ZSTD_DCtx *thread_dctx(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, make_dctx_key);
  if (!g_dctx_keyed) return NULL;
  ZSTD_DCtx *d = pthread_getspecific(g_dctx_key);
  if (!d && (d = ZSTD_createDCtx()) && pthread_setspecific(g_dctx_key, d) != 0) {
    ZSTD_freeDCtx(d);
    d = NULL;
  }
  return d;
}

static int decompress(const uint8_t *body, size_t len, size_t max, uint8_t **raw, size_t *n) {
  ZSTD_DCtx *d = thread_dctx();
  return d ? perf__batch_decompress_with(d, body, len, max, raw, n)
           : perf__batch_decompress(body, len, max, raw, n);
}

/* Decompress (capped), walk the protobuf against the limits before
   unpacking it (batch_limits.h: what the unpack would allocate), unpack. */
static unsigned decode_payload(const ingest_target_t *t, decode_arena_t *arena, const uint8_t *body,
                               size_t len, Perf__V1__Batch **bt, ingest_result_t *res) {
  static const uint8_t ZSTD_MAGIC[4] = {0x28, 0xb5, 0x2f, 0xfd};
  if (len < 4 || memcmp(body, ZSTD_MAGIC, 4) != 0)
    return set_result(res, 400, REJECT_BAD_PAYLOAD, "body is not a zstd frame"), 400;
  uint8_t *raw = NULL;
  size_t n = 0;
  int rc = decompress(body, len, t->max_decompressed, &raw, &n);
  unsigned limit = rc == PERF_OK
                       ? batch_limits_scan(limits_of(t), raw, n, res->message, sizeof res->message)
                       : 0;
  if (rc == PERF_OK && !limit)
    rc = perf__batch_decode_uncompressed_with(arena ? decode_arena_allocator(arena) : NULL, raw, n,
                                              bt);
  free(raw);
  if (limit) {
    res->status = limit;
    res->reason = limit == 413 ? REJECT_OVER_LIMIT : REJECT_BAD_PAYLOAD;
    return limit;
  }
  if (rc == PERF_OK) return 200;
  if (rc == PERF_E_TRUNCATED)
    set_result(res, 413, REJECT_DECOMPRESSED_LARGE, "decompressed size over the limit (%zu bytes)",
               t->max_decompressed);
  else if (rc == PERF_E_NO_MEMORY)
    set_result(res, 503, REJECT_STORE_ERROR, "out of memory");
  else
    set_result(res, 400, REJECT_BAD_PAYLOAD,
               "not a valid perf.v1.Batch: corrupt zstd frame, trailing bytes, bad protobuf or a "
               "table reference out of range");
  return res->status;
}

static unsigned check_batch(const Perf__V1__Batch *bt, const uint8_t *header_id,
                            ingest_result_t *res) {
  if (memcmp(bt->batch_id.data, header_id, STORE_BATCH_ID_BYTES) != 0)
    return set_result(res, 400, REJECT_BAD_BATCH_ID,
                      "batch_id in the payload differs from X-Perf-Batch-Id"),
           400;
  if (!bt->resource) return set_result(res, 400, REJECT_BAD_PAYLOAD, "batch has no resource"), 400;
  if (bt->resource->n_tags > PERF_MAX_TAGS)
    return set_result(res, 400, REJECT_BAD_PAYLOAD, "resource has %zu tags (at most %d)",
                      bt->resource->n_tags, PERF_MAX_TAGS),
           400;
  for (size_t i = 0; i < bt->n_strings; i++)
    if (!bt->strings[i]) return set_result(res, 400, REJECT_BAD_PAYLOAD, "null string"), 400;
  char why[192];
  if (batch_loops_check(bt, why, sizeof why) != 0 || profile_check(bt, why, sizeof why) != 0)
    return set_result(res, 400, REJECT_BAD_PAYLOAD, "%s", why), 400;
  return 200;
}

/* Text not UTF-8 (symbol names are bytes from ELF files, the reason and
   resource come from the app) gets U+FFFD for its bad bytes, in place, so
   the frames JSON and the API's answers are valid. */
/* A string made valid UTF-8 (perf__utf8_sanitize), the copy where the
   batch's memory is: the arena, or malloc (protobuf-c's default). */
static int utf8_repair(decode_arena_t *arena, char **text) {
  if (!*text || perf__utf8_valid(*text)) return 0;
  char *clean = perf__utf8_sanitize(*text);
  if (!clean) return -1;
  if (arena) {
    char *copy = decode_arena_strdup(arena, clean);
    free(clean);
    if (!copy) return -1;
    clean = copy;
  } else {
    free(*text);
  }
  *text = clean;
  return 0;
}

/* Repaired, then cut at --max-string-bytes (batch_limits_cut_string). */
static int text_fix(decode_arena_t *arena, char **text, size_t max) {
  if (utf8_repair(arena, text) != 0) return -1;
  if (*text) batch_limits_cut_string(*text, max);
  return 0;
}

static unsigned repair_text(const ingest_target_t *t, decode_arena_t *arena, Perf__V1__Batch *bt,
                            ingest_result_t *res) {
  size_t max = limits_of(t)->string_bytes;
  int rc = 0;
  for (size_t i = 0; i < bt->n_strings; i++)
    rc |= text_fix(arena, &bt->strings[i], max);
  for (size_t i = 0; i < bt->n_modules; i++)
    rc |= text_fix(arena, &bt->modules[i]->path, max);
  for (size_t i = 0; i < bt->n_events; i++)
    rc |= text_fix(arena, &bt->events[i]->reason, max) |
          text_fix(arena, &bt->events[i]->label, max) | text_fix(arena, &bt->events[i]->loop, max);
  for (size_t i = 0; i < bt->n_loops; i++)
    rc |= text_fix(arena, &bt->loops[i]->loop, max);
  Perf__V1__Resource *r = bt->resource;
  rc |= text_fix(arena, &r->app_name, max) | text_fix(arena, &r->app_version, max) |
        text_fix(arena, &r->environment, max) | text_fix(arena, &r->host, max);
  for (size_t i = 0; i < r->n_tags; i++)
    rc |= text_fix(arena, &r->tags[i]->key, max) | text_fix(arena, &r->tags[i]->value, max);
  if (rc) return set_result(res, 503, REJECT_STORE_ERROR, "out of memory"), 503;
  return 200;
}

/* Stacks deeper than --max-stack-frames cut, then the record's size
   checked before it is built. */
static unsigned fit_limits(const ingest_target_t *t, decode_arena_t *arena, Perf__V1__Batch *bt,
                           ingest_result_t *res) {
  const batch_limits_t *l = limits_of(t);
  if (batch_limits_cut_stacks(arena ? decode_arena_allocator(arena) : NULL, bt, l->stack_frames) !=
      0)
    return set_result(res, 503, REJECT_STORE_ERROR, "out of memory"), 503;
  unsigned status = batch_limits_text(l, bt, res->message, sizeof res->message);
  if (!status) return 200;
  res->status = status;
  res->reason = REJECT_OVER_LIMIT;
  return status;
}

/* ---- the key's bounds on new values -------------------------------------- */

#define KEY_REFUSED 100  /* put_record: a key's bound refused the batch (res says which) */
#define LOOP_NAME "loop" /* the second text of a loop name's value */

/* The batch's values a key's bounds count (key_bounds.h): its stacks'
   signatures, its events' labels and loop names and those of its loop
   stats (labels too: each a rollup dimension), its app and version, its
   tags; NULL when out of memory. A loop name is hashed apart from a label
   of the same text. */
static key_value_t *record_values(const record_t *r, size_t *n) {
  const store_batch_t *b = &r->batch;
  key_value_t *v = malloc((b->n_stacks + 2 * b->n_events + b->n_loops + b->n_tags + 1) * sizeof *v);
  if (!v) return NULL;
  size_t k = 0;
  for (size_t i = 0; i < b->n_stacks; i++)
    v[k++] = key_value_of(KEY_BOUND_STACKS, b->stacks[i].signature, NULL);
  for (size_t i = 0; i < b->n_events; i++) {
    if (b->events[i].label && b->events[i].label[0])
      v[k++] = key_value_of(KEY_BOUND_LABELS, b->events[i].label, NULL);
    if (b->events[i].loop && b->events[i].loop[0])
      v[k++] = key_value_of(KEY_BOUND_LABELS, b->events[i].loop, LOOP_NAME);
  }
  for (size_t i = 0; i < b->n_loops; i++)
    v[k++] = key_value_of(KEY_BOUND_LABELS, b->loops[i].loop, LOOP_NAME);
  if (b->version && b->version[0])
    v[k++] = key_value_of(KEY_BOUND_VERSIONS, b->app ? b->app : "", b->version);
  for (size_t i = 0; i < b->n_tags; i++)
    v[k++] = key_value_of(KEY_BOUND_TAGS, b->tags[i].key, b->tags[i].value);
  *n = k;
  return v;
}

/* 0 when key may store the record (its new values counted), else the
   status set in res: 429 with the seconds left in the key's window, or
   413 when the batch alone creates more than a bound allows. */
static unsigned admit_record(const ingest_target_t *t, const char *key, key_value_t *v, size_t n,
                             ingest_result_t *res) {
  key_refusal_t why;
  if (key_bounds_admit(t->bounds, key, v, n, symbolizer_now_s(), &why)) return 0;
  const char *noun = key_bound_noun(why.kind), *flag = key_bound_flag(why.kind);
  reject_reason_t reason = (reject_reason_t)(REJECT_NEW_STACKS + why.kind);
  if (!why.retry_after_s)
    return set_result(res, 413, reason, "batch creates %llu new %s, more than %s %llu allows",
                      (unsigned long long)why.batch_new, noun, flag, (unsigned long long)why.bound),
           413;
  set_result(res, 429, reason,
             "new %s over the bound for this API key: %llu in this batch, %llu created in this "
             "window (%s %llu); retry in %u s",
             noun, (unsigned long long)why.batch_new, (unsigned long long)why.window_used, flag,
             (unsigned long long)why.bound, why.retry_after_s);
  res->retry_after_s = why.retry_after_s;
  return 429;
}

/* The record stored, when the key's bounds admit it. */
static int put_record(const ingest_target_t *t, const char *key, record_t *r,
                      ingest_result_t *res) {
  size_t n = 0;
  key_value_t *v = t->bounds ? record_values(r, &n) : NULL;
  if (t->bounds && !v) return STORE_ERROR;
  int rc = admit_record(t, key, v, n, res) ? KEY_REFUSED : t->ops->put_batch(t->store, &r->batch);
  if (rc == STORE_OK || rc == STORE_DUPLICATE) key_bounds_learn(t->bounds, v, n);
  free(v);
  return rc;
}

static unsigned store_batch(const ingest_target_t *t, const char *key, const Perf__V1__Batch *bt,
                            ingest_result_t *res) {
  record_t r;
  char batch_hex[2 * STORE_BATCH_ID_BYTES + 1];
  hex_of(bt->batch_id.data, STORE_BATCH_ID_BYTES, batch_hex);
  bool built = build_record(t, bt, &r) == 0;
  int rc = built ? put_record(t, key, &r, res) : STORE_ERROR;
  if (rc == STORE_OK && t->stored) t->stored(t->stored_user, r.batch.app, r.batch.version);
  record_free(&r);
  if (rc == KEY_REFUSED) return res->status;
  /* After the store: a rename the resymbolizer starts from now on sees
     these stacks. */
  for (size_t i = 0; rc == STORE_OK && t->resym && i < r.frames.n_unresolved; i++)
    resymbolizer_want(t->resym, r.frames.unresolved[i]);
  if (rc == STORE_OK) metrics_frames_symbolized(r.frames.named, r.frames.unnamed);
  if (rc == STORE_OK) metrics_sdk_drops(r.batch.drops); /* a duplicate's were counted once */
  if (rc == STORE_OK && r.batch.loop_stats) metrics_loop_stats(r.batch.loop_stats);
  if (r.frames.n_unusable)
    collector_log("batch %s: %llu frames of build-id %s kept as the device named them: "
                  "the debug file's answer could not be stored\n",
                  batch_hex, (unsigned long long)r.frames.n_unusable, r.frames.unusable);
  if (rc == STORE_ERROR) {
    collector_log("batch %s: not stored (503): %s\n", batch_hex,
                  built ? "the store failed (said above)" : "out of memory building its rows");
    return set_result(res, 503, REJECT_STORE_ERROR, "store failed"), 503;
  }
  if (rc == STORE_LOST)
    return set_result(res, 503, REJECT_DB_LOST, "the database file was deleted or replaced"), 503;
  res->status = 200;
  res->duplicate = rc == STORE_DUPLICATE;
  res->events = bt->n_events;
  res->samples = r.samples;
  snprintf(res->message, sizeof res->message, "%s", res->duplicate ? "duplicate" : "stored");
  return 200;
}

unsigned ingest_batch(const ingest_target_t *t, const char *key, const uint8_t *body, size_t len,
                      const uint8_t header_id[STORE_BATCH_ID_BYTES], ingest_result_t *res) {
  memset(res, 0, sizeof *res);
  Perf__V1__Batch *bt = NULL;
  decode_arena_t *arena = decode_arena_thread(); /* NULL: malloc, freed piece by piece */
  if (decode_payload(t, arena, body, len, &bt, res) == 200 &&
      check_batch(bt, header_id, res) == 200 && repair_text(t, arena, bt, res) == 200 &&
      fit_limits(t, arena, bt, res) == 200)
    store_batch(t, key, bt, res);
  if (arena)
    decode_arena_reset(arena); /* the whole batch at once */
  else if (bt)
    perf__v1__batch__free_unpacked(bt, NULL);
  return res->status;
}
