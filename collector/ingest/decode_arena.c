/*
 * decode_arena.c - a bump arena per ingest thread (see decode_arena.h).
 */
#include "collector/ingest/decode_arena.h"

#include <pthread.h>
#include <stdalign.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct chunk_s {
  struct chunk_s *next;
  size_t size, used; /* bytes of data */
  alignas(max_align_t) unsigned char data[];
} chunk_t;

struct decode_arena_s {
  chunk_t *chunks; /* in use, the newest first: allocations bump its used */
  chunk_t *spare;  /* empty, kept by the last reset */
  size_t held;     /* data bytes of every chunk */
  ProtobufCAllocator allocator;
};

#define ALIGN (alignof(max_align_t))

static chunk_t *chunk_new(size_t size) {
  chunk_t *c = malloc(sizeof *c + size);
  if (!c) return NULL;
  c->next = NULL;
  c->size = size;
  c->used = 0;
  return c;
}

static void *arena_alloc(void *data, size_t size) {
  decode_arena_t *a = data;
  size = (size + ALIGN - 1) & ~(ALIGN - 1);
  if (!size) size = ALIGN;
  chunk_t *c = a->chunks;
  if (!c || c->size - c->used < size) {
    chunk_t *n = a->spare;
    if (n && n->size >= size) {
      a->spare = n->next;
    } else {
      if (!(n = chunk_new(size > DECODE_ARENA_CHUNK ? size : DECODE_ARENA_CHUNK))) return NULL;
      a->held += n->size;
    }
    n->next = a->chunks;
    a->chunks = c = n;
  }
  void *p = c->data + c->used;
  c->used += size;
  return p;
}

static void arena_free(void *data, void *p) {
  (void)data;
  (void)p; /* freed with the whole batch: decode_arena_reset */
}

static decode_arena_t *arena_new(void) {
  decode_arena_t *a = calloc(1, sizeof *a);
  if (!a) return NULL;
  a->allocator = (ProtobufCAllocator){arena_alloc, arena_free, a};
  return a;
}

static void chunks_free(chunk_t *c) {
  while (c) {
    chunk_t *next = c->next;
    free(c);
    c = next;
  }
}

static void arena_free_all(void *p) {
  decode_arena_t *a = p;
  chunks_free(a->chunks);
  chunks_free(a->spare);
  free(a);
}

static pthread_key_t g_key;
static bool g_keyed;

static void make_key(void) {
  g_keyed = pthread_key_create(&g_key, arena_free_all) == 0;
}

decode_arena_t *decode_arena_thread(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, make_key);
  if (!g_keyed) return NULL;
  decode_arena_t *a = pthread_getspecific(g_key);
  if (!a && (a = arena_new()) && pthread_setspecific(g_key, a) != 0) {
    arena_free_all(a);
    a = NULL;
  }
  return a;
}

ProtobufCAllocator *decode_arena_allocator(decode_arena_t *a) {
  return &a->allocator;
}

char *decode_arena_strdup(decode_arena_t *a, const char *text) {
  size_t n = strlen(text) + 1;
  char *copy = arena_alloc(a, n);
  if (copy) memcpy(copy, text, n);
  return copy;
}

/* The chunks kept as spares, up to DECODE_ARENA_KEEP bytes of them, the
   rest freed. */
void decode_arena_reset(decode_arena_t *a) {
  chunk_t *all = a->chunks;
  a->chunks = NULL;
  size_t kept = 0;
  for (chunk_t *c = a->spare; c; c = c->next)
    kept += c->size;
  while (all) {
    chunk_t *c = all;
    all = c->next;
    if (kept + c->size <= DECODE_ARENA_KEEP) {
      kept += c->size;
      c->used = 0;
      c->next = a->spare;
      a->spare = c;
    } else {
      free(c);
    }
  }
  a->held = kept;
}

size_t decode_arena_held(const decode_arena_t *a) {
  return a->held;
}
