/*
 * batch_loop_stats.c - the watched loop's statistics in a batch (LoopStats,
 * see perf__batch_add_loop_stats in batch.h): summed into the open batch,
 * and read back from a decoded one (the journal's records, tools). Runs on
 * the thread that owns the builder (the writer).
 */
#include <string.h>

#include "sdk/base/clock.h"
#include "sdk/wire/batch_internal.h"

/* LoopStats at its largest: 2 fields of 1 tag + 10 varint bytes, the
   buckets packed (tag, length, varints of at most 10 bytes). */
#define LOOP_STATS_MAX_BYTES (2 * 11 + 2 + PERF__LOOP_BUCKETS * 10)

int perf__batch_add_loop_stats(perf__batch_builder_t *b, const perf__batch_loop_stats_t *stats) {
  if (!b || !stats) return PERF_E_INVALID_ARGUMENT;
  if (!b->has_loop_stats) { /* their room, at their largest, the first time */
    size_t add = perf__batch_field_bytes(LOOP_STATS_MAX_BYTES);
    if (b->bytes + add > b->opts.max_bytes) return PERF_E_NO_MEMORY;
    b->bytes += add;
  }
  if (!perf__batch_has_content(b)) b->opened_ns = perf__now_ns(); /* a stats-only batch opens */
  b->has_loop_stats = true;
  b->loop_stats.watched_ns += stats->watched_ns;
  b->loop_stats.busy_ns += stats->busy_ns;
  for (size_t i = 0; i < PERF__LOOP_BUCKETS; i++)
    b->loop_stats.units[i] += stats->units[i];
  return PERF_OK;
}

bool perf__batch_loop_stats_of(const Perf__V1__Batch *src, perf__batch_loop_stats_t *out) {
  memset(out, 0, sizeof *out);
  const Perf__V1__LoopStats *ls = src ? src->loop_stats : NULL;
  if (!ls) return false;
  out->watched_ns = ls->watched_nanos;
  out->busy_ns = ls->busy_nanos;
  for (size_t i = 0; i < ls->n_busy_units_by_bucket; i++) {
    size_t to = i < PERF__LOOP_BUCKETS ? i : PERF__LOOP_BUCKETS - 1;
    out->units[to] += ls->busy_units_by_bucket[i];
  }
  return true;
}

bool perf__batch_has_content(const perf__batch_builder_t *b) {
  return b && (b->n_events > 0 || b->has_loop_stats);
}
