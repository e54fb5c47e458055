/*
 * decode_arena.h - the memory a batch's unpacked protobuf lives in: a
 * bump arena per ingest thread, given to protobuf-c as its allocator.
 * Unpacking a batch makes thousands of small allocations (every message,
 * string and array of it) that all die together when the batch is stored;
 * from the arena they cost a pointer bump each, and the whole batch is
 * freed by one reset instead of a walk of the tree and a free per piece.
 *
 * Chunks of DECODE_ARENA_CHUNK bytes (a larger allocation gets a chunk of
 * its own); a reset keeps DECODE_ARENA_KEEP bytes of them for the next
 * batch and frees the rest, so what a thread holds between batches is
 * bounded whatever the largest batch was. Each thread its own arena (made
 * at its first batch, freed when it ends); no locks.
 */
#ifndef PERF_COLLECTOR_DECODE_ARENA_H
#define PERF_COLLECTOR_DECODE_ARENA_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#define DECODE_ARENA_CHUNK (64u << 10)
#define DECODE_ARENA_KEEP (256u << 10)

typedef struct decode_arena_s decode_arena_t;

/* The calling thread's arena; NULL when it cannot be made (out of
   memory): the caller then uses the default allocator. */
decode_arena_t *decode_arena_thread(void);

/* protobuf-c's allocator over a: alloc bumps, free does nothing. */
ProtobufCAllocator *decode_arena_allocator(decode_arena_t *a);

/* A copy of text in a; NULL when out of memory. */
char *decode_arena_strdup(decode_arena_t *a, const char *text);

/* Everything allocated from a since the last reset freed at once. */
void decode_arena_reset(decode_arena_t *a);

/* Bytes a holds now (its chunks), for the tests. */
size_t decode_arena_held(const decode_arena_t *a);

#endif
