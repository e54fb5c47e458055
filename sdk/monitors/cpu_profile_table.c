/*
 * cpu_profile_table.c - the continuous profile's window table (see
 * cpu_profile_table.h): open addressing on the stack's hash, at most three
 * quarters of the slots used, frames appended to one pool. CPU monitor
 * thread.
 */
#include "sdk/monitors/cpu_profile_table.h"

#include <stdlib.h>
#include <string.h>

#include "perf_sdk.h"

#define MAX_DEPTH 256 /* frames kept per stack, as an event keeps */

static uint64_t hash_key(pid_t tid, perf__state_t state, const uintptr_t *pcs, size_t n,
                         perf__stack_end_t end);

int perf__profile_table_init(perf__profile_table_t *t, size_t max_entries, size_t max_frames) {
  memset(t, 0, sizeof *t);
  if (max_entries < 1) max_entries = 1;
  size_t slots = 4;
  while (slots * 3 < max_entries * 4)
    slots *= 2;
  t->slots = calloc(slots, sizeof *t->slots);
  t->frames = calloc(max_frames ? max_frames : 1, sizeof *t->frames);
  if (!t->slots || !t->frames) {
    perf__profile_table_free(t);
    return PERF_E_NO_MEMORY;
  }
  t->slot_count = slots;
  t->max_entries = max_entries;
  t->frame_cap = max_frames;
  return PERF_OK;
}

int perf__profile_table_add(perf__profile_table_t *t, pid_t tid, perf__state_t state,
                            const uintptr_t *pcs, size_t n, perf__stack_end_t end,
                            uint64_t weight_ns) {
  if (n > MAX_DEPTH) {
    n = MAX_DEPTH;
    end = PERF__STACK_END_DEPTH;
  }
  uint64_t h = hash_key(tid, state, pcs, n, end);
  size_t mask = t->slot_count - 1, i = (size_t)h & mask;
  for (; t->slots[i].tid != 0; i = (i + 1) & mask) {
    perf__profile_entry_t *e = &t->slots[i];
    if (e->hash == h && e->tid == tid && e->state == state && e->end == end && e->depth == n &&
        memcmp(&t->frames[e->first], pcs, n * sizeof *pcs) == 0) {
      e->samples++;
      e->weight_ns += weight_ns;
      t->samples++;
      return PERF_OK;
    }
  }
  if (t->count == t->max_entries || t->frame_cap - t->frame_count < n) {
    t->dropped++;
    return PERF_E_NO_MEMORY;
  }
  memcpy(&t->frames[t->frame_count], pcs, n * sizeof *pcs);
  t->slots[i] = (perf__profile_entry_t){
      h, tid, (uint8_t)state, (uint8_t)end, (uint16_t)n, (uint32_t)t->frame_count, 1, weight_ns};
  t->frame_count += n;
  t->count++;
  t->samples++;
  return PERF_OK;
}

const perf__profile_entry_t *perf__profile_table_at(const perf__profile_table_t *t, size_t i) {
  return i < t->slot_count && t->slots[i].tid != 0 ? &t->slots[i] : NULL;
}

void perf__profile_table_reset(perf__profile_table_t *t) {
  if (t->count) memset(t->slots, 0, t->slot_count * sizeof *t->slots);
  t->count = t->frame_count = 0;
  t->samples = t->dropped = 0;
}

void perf__profile_table_free(perf__profile_table_t *t) {
  free(t->slots);
  free(t->frames);
  memset(t, 0, sizeof *t);
}

static uint64_t hash_key(pid_t tid, perf__state_t state, const uintptr_t *pcs, size_t n,
                         perf__stack_end_t end) {
  uint64_t h = 1469598103934665603ULL ^ (uint64_t)tid ^ (uint64_t)end << 32 ^ (uint64_t)state << 40;
  for (size_t i = 0; i < n; i++) /* FNV-1a over words */
    h = (h ^ pcs[i]) * 1099511628211ULL;
  return h;
}
