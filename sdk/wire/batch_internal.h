/*
 * batch_internal.h - the builder's state, shared by the files of the batch
 * builder (batch_builder.c: lifecycle, events, finish; batch_intern.c: the
 * deduplicated tables). Not for use outside sdk/wire.
 *
 * Tables only grow at the end, and an event is a transaction: the table
 * sizes are marked when it opens, and an abort pops every entry added since.
 * The hash indexes chain new entries in front of old ones, so popping the
 * newest entries in reverse order restores them.
 */
#ifndef PERF_WIRE_BATCH_INTERNAL_H
#define PERF_WIRE_BATCH_INTERNAL_H

#include <zstd.h>

#include "sdk/wire/batch.h"

/* A hash index over a table whose entries are only ever appended or popped
   from the end. heads[] holds entry + 1 (0 = empty bucket); a bucket chains
   its entries newest first. */
typedef struct perf__intern_index_s {
  uint32_t *heads;
  size_t nbuckets;
  uint32_t *next;
  uint64_t *hash;
  size_t count, cap;
} perf__intern_index_t;

typedef struct perf__string_rec_s {
  char *text;
  uint32_t len;
} perf__string_rec_t;

typedef struct perf__frame_rec_s {
  uint32_t first, count; /* the frame's lines in line_pool[first..first+count) */
} perf__frame_rec_t;

typedef struct perf__stack_rec_s {
  uint32_t first, depth; /* frame indices in pool[first..first+depth) */
  Perf__V1__StackEnd end;
} perf__stack_rec_t;

/* Table sizes (and the byte estimate) at one moment. */
typedef struct perf__batch_mark_s {
  size_t strings, modules, functions, frames, lines, stacks, pool, bytes;
} perf__batch_mark_t;

struct perf__batch_builder_s {
  perf__batch_options_t opts;
  Perf__V1__Resource resource;
  Perf__V1__KeyValue tags[PERF_MAX_TAGS];
  Perf__V1__KeyValue *tag_ptrs[PERF_MAX_TAGS];
  char *owned[4 + 2 * PERF_MAX_TAGS]; /* resource strings */
  size_t owned_count;
  size_t header_bytes; /* batch fields outside the tables, upper bound */
  uint64_t sequence;   /* of the last finished batch */
  uint64_t generation; /* perf__batch_generation */

  perf__string_rec_t *strings;
  size_t n_strings, strings_cap;
  perf__intern_index_t string_ix;
  Perf__V1__Module *modules;
  size_t n_modules, modules_cap;
  Perf__V1__Function *functions;
  size_t n_functions, functions_cap;
  perf__intern_index_t function_ix;
  Perf__V1__Frame *frames;
  perf__frame_rec_t *frame_recs; /* parallel to frames: where their lines are */
  size_t n_frames, frames_cap, frame_recs_cap;
  perf__intern_index_t frame_ix;
  Perf__V1__Line *line_pool; /* every frame's lines, back to back */
  size_t n_lines, lines_cap;
  perf__stack_rec_t *stacks;
  size_t n_stacks, stacks_cap;
  perf__intern_index_t stack_ix;
  uint32_t *pool;
  size_t pool_len, pool_cap;
  Perf__V1__Event *events;
  size_t n_events, events_cap;
  bool has_loop_stats;            /* loop_stats holds something to send */
  perf__batch_loops_t loop_stats; /* the sum, and each named loop's */
  size_t bytes;                   /* serialized size bound of the batch as it stands */
  int64_t opened_ns;
  perf__batch_mark_t event_mark; /* where the open event began */

  perf__batch_count_t *counts; /* scratch: an event's counts, sorted */
  size_t counts_cap;
};

/* A generation number never handed out before in this process. */
uint64_t perf__batch_new_generation(void);

/* Grow *items (of item_size bytes each) to hold `need`; PERF_E_NO_MEMORY. */
int perf__batch_grow(void **items, size_t *cap, size_t need, size_t item_size);

/* A length-delimited field numbered 1..15 (one tag byte) with `payload`
   bytes: what one table entry or event adds to the batch. */
size_t perf__batch_field_bytes(size_t payload);

/* Account for n more serialized bytes; PERF__BATCH_FULL past max_bytes. */
int perf__batch_add_bytes(perf__batch_builder_t *b, size_t n);

perf__batch_mark_t perf__batch_take_mark(const perf__batch_builder_t *b);

/* Pop every table entry added since `m`. */
void perf__batch_rollback(perf__batch_builder_t *b, const perf__batch_mark_t *m);

/* Empty every table but strings[0] (""). */
void perf__batch_clear_tables(perf__batch_builder_t *b);

/* Free the tables' memory (the builder is being freed). */
void perf__batch_free_tables(perf__batch_builder_t *b);

#endif
