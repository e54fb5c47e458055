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
  stack_built_t *b;
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

stack_built_t *stack_built_new(void) {
  stack_built_t *b = calloc(1, sizeof *b);
  if (b) b->refs = 1;
  return b;
}

void stack_built_release(stack_built_t *b) {
  free(b->frames_json);
  free(b->names_json);
  for (size_t i = 0; b->labels && i < b->depth; i++)
    free(b->labels[i]);
  free(b->labels);
  unsigned refs = b->refs;
  memset(b, 0, sizeof *b);
  b->refs = refs;
}

void stack_built_unref(stack_built_t *b) {
  if (!b || __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) != 0) return;
  stack_built_release(b);
  free(b);
}

static void slot_clear(stack_cache_t *c, slot_t *s) {
  if (!s->full) return;
  stack_built_unref(s->b);
  s->b = NULL;
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

static size_t built_bytes(const stack_built_t *b) {
  size_t n = sizeof *b + strlen(b->frames_json) + strlen(b->names_json) + b->depth * sizeof(char *);
  for (size_t i = 0; i < b->depth; i++)
    n += strlen(b->labels[i]) + 1;
  return n;
}

static size_t home(const stack_cache_t *c, const uint64_t key[2]) {
  return (size_t)(key[0] % c->n);
}

stack_built_t *stack_cache_get(stack_cache_t *c, const uint64_t key[2], uint64_t generation,
                               double now_s) {
  if (!c) return NULL;
  stack_built_t *hit = NULL;
  pthread_mutex_lock(&c->lock);
  for (size_t p = 0, i = home(c, key); p < PROBES && p < c->n; p++, i = (i + 1) % c->n) {
    slot_t *s = &c->slots[i];
    if (!s->full || s->key[0] != key[0] || s->key[1] != key[1]) continue;
    if (s->generation != generation) {
      slot_clear(c, s); /* stale */
      break;
    }
    if (s->good_until && now_s >= s->good_until) break; /* due: stack_cache_get_due */
    s->used = ++c->clock;
    hit = s->b;
    __atomic_add_fetch(&hit->refs, 1, __ATOMIC_RELAXED);
    break;
  }
  pthread_mutex_unlock(&c->lock);
  return hit;
}

/* The slot of key, or NULL; under c->lock. */
static slot_t *slot_of(stack_cache_t *c, const uint64_t key[2]) {
  for (size_t p = 0, i = home(c, key); p < PROBES && p < c->n; p++, i = (i + 1) % c->n) {
    slot_t *s = &c->slots[i];
    if (s->full && s->key[0] == key[0] && s->key[1] == key[1]) return s;
  }
  return NULL;
}

stack_built_t *stack_cache_get_due(stack_cache_t *c, const uint64_t key[2], uint64_t generation) {
  if (!c) return NULL;
  pthread_mutex_lock(&c->lock);
  slot_t *s = slot_of(c, key);
  stack_built_t *due = s && s->generation == generation && s->good_until ? s->b : NULL;
  if (due) {
    s->used = ++c->clock;
    __atomic_add_fetch(&due->refs, 1, __ATOMIC_RELAXED);
  }
  pthread_mutex_unlock(&c->lock);
  return due;
}

void stack_cache_renew(stack_cache_t *c, const uint64_t key[2], const stack_built_t *b,
                       double good_until_s) {
  if (!c) return;
  pthread_mutex_lock(&c->lock);
  slot_t *s = slot_of(c, key);
  if (s && s->b == b && s->good_until) s->good_until = good_until_s;
  pthread_mutex_unlock(&c->lock);
}

void stack_cache_put(stack_cache_t *c, const uint64_t key[2], uint64_t generation,
                     double good_until_s, stack_built_t *b) {
  if (!c || !b->frames_json || !b->names_json) return;
  size_t bytes = built_bytes(b);
  if (bytes > c->max_bytes / 4) return;
  __atomic_add_fetch(&b->refs, 1, __ATOMIC_RELAXED);
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
  *victim = (slot_t){{key[0], key[1]}, generation, good_until_s, ++c->clock, bytes, true, b};
  c->bytes += bytes;
  pthread_mutex_unlock(&c->lock);
}
