/*
 * test_decode_arena.c - the per-thread bump arena a batch is unpacked into
 * (collector/ingest/decode_arena.c): every allocation aligned for any
 * type and writable to its end (ASan sees an overrun), allocations over a
 * chunk served whole, a reset that keeps at most DECODE_ARENA_KEEP bytes
 * whatever was allocated before it, and a real batch unpacked through the
 * arena as protobuf-c's allocator, equal to the default allocator's.
 */
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "collector/ingest/decode_arena.h"
#include "perf/v1/perf.pb-c.h"

static void *alloc(decode_arena_t *a, size_t n) {
  ProtobufCAllocator *al = decode_arena_allocator(a);
  return al->alloc(al->allocator_data, n);
}

static void case_aligned_and_bounded(void) {
  decode_arena_t *a = decode_arena_thread();
  CHECK(a != NULL);
  CHECK(decode_arena_thread() == a); /* the thread's own, once */
  for (size_t n = 1; n < 5000; n += 37) {
    unsigned char *p = alloc(a, n);
    CHECK(p != NULL);
    CHECK((uintptr_t)p % alignof(max_align_t) == 0);
    memset(p, 0xab, n);
  }
  /* An allocation over a chunk: whole, in a chunk of its own. */
  size_t big = 3 * DECODE_ARENA_CHUNK + 5;
  unsigned char *p = alloc(a, big);
  CHECK(p != NULL);
  memset(p, 0xcd, big);
  /* 4 MiB in all, then a reset: at most DECODE_ARENA_KEEP kept. */
  for (int i = 0; i < 64; i++)
    CHECK(alloc(a, DECODE_ARENA_CHUNK - 100) != NULL);
  CHECKF(decode_arena_held(a) >= 64 * (size_t)DECODE_ARENA_CHUNK, "held %zu", decode_arena_held(a));
  decode_arena_reset(a);
  CHECKF(decode_arena_held(a) <= DECODE_ARENA_KEEP, "held %zu after a reset", decode_arena_held(a));
  /* The kept chunks serve the next batch: no growth for what they hold. */
  size_t kept = decode_arena_held(a);
  for (size_t used = 0; used + 1024 <= kept; used += 1024)
    CHECK(alloc(a, 1024) != NULL);
  CHECK_EQ_INT(decode_arena_held(a), kept);
  char *s = decode_arena_strdup(a, "caf\xc3\xa9");
  CHECK(s != NULL && strcmp(s, "caf\xc3\xa9") == 0);
  decode_arena_reset(a);
}

/* A batch packed, then unpacked into the arena: the same fields as
   unpacked with malloc. */
static void case_unpack(void) {
  Perf__V1__Batch bt = PERF__V1__BATCH__INIT;
  char *strings[200];
  char text[200][32];
  for (int i = 0; i < 200; i++) {
    snprintf(text[i], sizeof text[i], "function_%d", i);
    strings[i] = text[i];
  }
  bt.n_strings = 200;
  bt.strings = strings;
  uint8_t id[16] = {1, 2, 3};
  bt.batch_id.data = id;
  bt.batch_id.len = sizeof id;
  size_t n = perf__v1__batch__get_packed_size(&bt);
  uint8_t *buf = malloc(n);
  CHECK(buf != NULL);
  perf__v1__batch__pack(&bt, buf);
  decode_arena_t *a = decode_arena_thread();
  CHECK(a != NULL);
  for (int round = 0; round < 3; round++) { /* reused after each reset */
    Perf__V1__Batch *in_arena = perf__v1__batch__unpack(decode_arena_allocator(a), n, buf);
    Perf__V1__Batch *in_heap = perf__v1__batch__unpack(NULL, n, buf);
    CHECK(in_arena && in_heap);
    CHECK_EQ_INT(in_arena->n_strings, 200);
    for (size_t i = 0; i < 200; i++)
      CHECK(strcmp(in_arena->strings[i], in_heap->strings[i]) == 0);
    CHECK(memcmp(in_arena->batch_id.data, id, sizeof id) == 0);
    perf__v1__batch__free_unpacked(in_heap, NULL);
    decode_arena_reset(a);
  }
  free(buf);
}

static const test_case_t g_cases[] = {
    TEST_CASE(aligned_and_bounded),
    TEST_CASE(unpack),
};

int main(int argc, char **argv) {
  return test_main(g_cases, ARRAY_LEN(g_cases), argc, argv);
}
