/*
 * stack_cache.c - built stack rows by input hash (see stack_cache.h): an
 * open-addressed table of max_entries slots (linear probing, up to
 * PROBES), least recently used evicted among a key's probe window.
 */
#include "collector/ingest/stack_cache.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define PROBES 8

typedef struct slot_s {
  uint64_t key[2];
  uint64_t generation;
  double good_until; /* 0: while the generation lasts */
  uint64_t used;     /* the clock at the last hit or put */
  size_t bytes;
  bool full;
  stack_built_t b;
} slot_t;

struct stack_cache_s {
  pthread_mutex_t lock;
  slot_t *slots;
  size_t n, max_bytes, bytes;
  uint64_t clock;
};

stack_cache_t *stack_cache_new(size_t max_entries, size_t max_bytes) {
  stack_cache_t *c = calloc(1, sizeof *c);
  if (!c || !(c->slots = calloc(max_entries ? max_entries : 1, sizeof *c->slots))) {
    free(c);
    return NULL;
  }
  pthread_mutex_init(&c->lock, NULL);
  c->n = max_entries ? max_entries : 1;
  c->max_bytes = max_bytes;
  return c;
}

void stack_built_release(stack_built_t *b) {
  free(b->frames_json);
  free(b->names_json);
  for (size_t i = 0; b->labels && i < b->depth; i++)
    free(b->labels[i]);
  free(b->labels);
  b->frames_json = b->names_json = NULL;
  b->labels = NULL;
  b->depth = 0;
}

static void slot_clear(stack_cache_t *c, slot_t *s) {
  if (!s->full) return;
  stack_built_release(&s->b);
  c->bytes -= s->bytes;
  s->full = false;
}

void stack_cache_free(stack_cache_t *c) {
  if (!c) return;
  for (size_t i = 0; i < c->n; i++)
    slot_clear(c, &c->slots[i]);
  pthread_mutex_destroy(&c->lock);
  free(c->slots);
  free(c);
}

/* A deep copy of src into dst; false when out of memory (dst released). */
static bool copy_built(stack_built_t *dst, const stack_built_t *src) {
  *dst = *src;
  dst->frames_json = strdup(src->frames_json);
  dst->names_json = strdup(src->names_json);
  dst->labels = calloc(src->depth ? src->depth : 1, sizeof *dst->labels);
  dst->depth = 0;
  bool ok = dst->frames_json && dst->names_json && dst->labels;
  for (size_t i = 0; ok && i < src->depth; i++, dst->depth++)
    ok = (dst->labels[i] = strdup(src->labels[i])) != NULL;
  if (!ok) stack_built_release(dst);
  return ok;
}

static size_t built_bytes(const stack_built_t *b) {
  size_t n = sizeof *b + strlen(b->frames_json) + strlen(b->names_json) + b->depth * sizeof(char *);
  for (size_t i = 0; i < b->depth; i++)
    n += strlen(b->labels[i]) + 1;
  return n;
}

static size_t home(const stack_cache_t *c, const uint64_t key[2]) {
  return (size_t)(key[0] % c->n);
}

bool stack_cache_get(stack_cache_t *c, const uint64_t key[2], uint64_t generation, double now_s,
                     stack_built_t *out) {
  if (!c) return false;
  bool hit = false;
  pthread_mutex_lock(&c->lock);
  for (size_t p = 0, i = home(c, key); p < PROBES && p < c->n; p++, i = (i + 1) % c->n) {
    slot_t *s = &c->slots[i];
    if (!s->full || s->key[0] != key[0] || s->key[1] != key[1]) continue;
    if (s->generation != generation || (s->good_until && now_s >= s->good_until)) {
      slot_clear(c, s); /* stale */
      break;
    }
    s->used = ++c->clock;
    hit = copy_built(out, &s->b);
    break;
  }
  pthread_mutex_unlock(&c->lock);
  return hit;
}

void stack_cache_put(stack_cache_t *c, const uint64_t key[2], uint64_t generation,
                     double good_until_s, const stack_built_t *b) {
  if (!c || !b->frames_json || !b->names_json) return;
  size_t bytes = built_bytes(b);
  if (bytes > c->max_bytes / 4) return;
  stack_built_t copy;
  if (!copy_built(&copy, b)) return;
  pthread_mutex_lock(&c->lock);
  slot_t *victim = NULL;
  for (size_t p = 0, i = home(c, key); p < PROBES && p < c->n; p++, i = (i + 1) % c->n) {
    slot_t *s = &c->slots[i];
    if (s->full && s->key[0] == key[0] && s->key[1] == key[1]) {
      victim = s;
      break;
    }
    if (!victim || !s->full || (victim->full && s->used < victim->used)) victim = s;
  }
  slot_clear(c, victim);
  /* Over the byte budget: the least recently used of the whole table go. */
  while (c->bytes + bytes > c->max_bytes) {
    slot_t *old = NULL;
    for (size_t i = 0; i < c->n; i++)
      if (c->slots[i].full && (!old || c->slots[i].used < old->used)) old = &c->slots[i];
    if (!old) break;
    slot_clear(c, old);
  }
  *victim = (slot_t){{key[0], key[1]}, generation, good_until_s, ++c->clock, bytes, true, copy};
  c->bytes += bytes;
  pthread_mutex_unlock(&c->lock);
}
