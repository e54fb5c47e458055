/*
 * batch_loops.c - a batch's loop statistics checked and copied (see
 * batch_loops.h).
 */
#include "collector/ingest/batch_loops.h"

#include <stdio.h>
#include <string.h>

static uint64_t capped(uint64_t n) {
  return n > STORE_MAX_LOOP_VALUE ? STORE_MAX_LOOP_VALUE : n;
}

int batch_loops_check(const Perf__V1__Batch *bt, char *msg, size_t cap) {
  if (bt->loop_stats && bt->loop_stats->n_busy_units_by_bucket > STORE_LOOP_BUCKETS)
    return snprintf(msg, cap, "loop_stats.busy_units_by_bucket has %zu buckets (at most %d)",
                    bt->loop_stats->n_busy_units_by_bucket, STORE_LOOP_BUCKETS),
           -1;
  if (bt->n_loops > STORE_MAX_LOOPS)
    return snprintf(msg, cap, "loops has %zu entries (at most %d)", bt->n_loops, STORE_MAX_LOOPS),
           -1;
  for (size_t i = 0; i < bt->n_loops; i++) {
    const Perf__V1__LoopStats *ls = bt->loops[i];
    if (!ls->loop || !ls->loop[0])
      return snprintf(msg, cap, "loops[%zu].loop is empty (each loop's stats name their loop)", i),
             -1;
    if (ls->n_busy_units_by_bucket > STORE_LOOP_BUCKETS)
      return snprintf(msg, cap, "loops[%zu].busy_units_by_bucket has %zu buckets (at most %d)", i,
                      ls->n_busy_units_by_bucket, STORE_LOOP_BUCKETS),
             -1;
  }
  return 0;
}

void batch_loops_copy(const Perf__V1__LoopStats *ls, store_loop_stats_t *out) {
  memset(out, 0, sizeof *out);
  out->watched_ns = capped(ls->watched_nanos);
  out->busy_ns = capped(ls->busy_nanos);
  for (size_t i = 0; i < ls->n_busy_units_by_bucket && i < STORE_LOOP_BUCKETS; i++)
    out->units[i] = capped(ls->busy_units_by_bucket[i]);
}

static void add_capped(uint64_t *to, uint64_t v) {
  *to = capped(*to + v); /* each <= 2^48: no overflow */
}

size_t batch_loops_named(const Perf__V1__Batch *bt, store_named_loop_t *out) {
  size_t n = 0;
  for (size_t i = 0; i < bt->n_loops; i++) {
    store_loop_stats_t s;
    batch_loops_copy(bt->loops[i], &s);
    size_t k = 0;
    while (k < n && strcmp(out[k].loop, bt->loops[i]->loop) != 0)
      k++;
    if (k == n) {
      out[n++] = (store_named_loop_t){bt->loops[i]->loop, s};
      continue;
    }
    add_capped(&out[k].stats.watched_ns, s.watched_ns);
    add_capped(&out[k].stats.busy_ns, s.busy_ns);
    for (int b = 0; b < STORE_LOOP_BUCKETS; b++)
      add_capped(&out[k].stats.units[b], s.units[b]);
  }
  return n;
}
