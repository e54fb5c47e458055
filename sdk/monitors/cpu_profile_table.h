/*
 * cpu_profile_table.h - the continuous CPU profile's window in bounded
 * memory: one entry per (thread, state, stack), its samples and the CPU
 * time they stand for, the stacks' frames in one pool. Both are allocated
 * once at their full size; a sample that finds no room (no free entry, no
 * room for its frames) is counted as dropped, and the table never grows.
 * Stacks are keyed as an event keys them (sdk/pipeline/event.c: thread,
 * pcs and how the walk ended), plus the state.
 *
 * Used by the CPU monitor thread only.
 */
#ifndef PERF_CPU_PROFILE_TABLE_H
#define PERF_CPU_PROFILE_TABLE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sdk/sampler/sample_state.h"
#include "sdk/sampler/stack_end.h"

/* Capacity of a window's table: entries and frames (the frames average
   32 per entry). About 600 KiB on a 64-bit system. */
#define PERF__PROFILE_TABLE_ENTRIES 2048
#define PERF__PROFILE_TABLE_FRAMES (32 * PERF__PROFILE_TABLE_ENTRIES)

typedef struct perf__profile_entry_s {
  uint64_t hash;
  pid_t tid; /* 0: a free slot */
  uint8_t state, end;
  uint16_t depth;
  uint32_t first; /* its innermost frame in the table's frames */
  uint32_t samples;
  uint64_t weight_ns; /* the CPU time its samples stand for (before the window's scaling) */
} perf__profile_entry_t;

typedef struct perf__profile_table_s {
  perf__profile_entry_t *slots; /* open addressing, slot_count a power of two */
  size_t slot_count, max_entries, count;
  uintptr_t *frames;
  size_t frame_cap, frame_count;
  uint64_t samples, dropped; /* this window's: aggregated, and not (no room) */
} perf__profile_table_t;

/* Allocate an empty table of max_entries entries (at least 1) and
   max_frames frames. PERF_OK or PERF_E_NO_MEMORY. */
int perf__profile_table_init(perf__profile_table_t *t, size_t max_entries, size_t max_frames);

/* Add one sample of thread tid in `state`, stack pcs[0..n) (innermost
   first) that ended as `end`, standing for weight_ns. PERF_OK, or
   PERF_E_NO_MEMORY when the table is full (the sample is counted in
   t->dropped). */
int perf__profile_table_add(perf__profile_table_t *t, pid_t tid, perf__state_t state,
                            const uintptr_t *pcs, size_t n, perf__stack_end_t end,
                            uint64_t weight_ns);

/* The i-th slot when it holds an entry (i < t->slot_count), else NULL. */
const perf__profile_entry_t *perf__profile_table_at(const perf__profile_table_t *t, size_t i);

/* Empty the table for the next window (its memory is kept). */
void perf__profile_table_reset(perf__profile_table_t *t);

void perf__profile_table_free(perf__profile_table_t *t);

#endif
