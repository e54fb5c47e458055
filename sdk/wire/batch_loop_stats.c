/*
 * batch_loop_stats.c - the watched loops' statistics in a batch (LoopStats,
 * see perf__batch_add_loop_stats in batch.h): summed into the open batch,
 * and read back from a decoded one (the journal's records, tools). Runs on
 * the thread that owns the builder (the writer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/clock.h"
#include "sdk/wire/batch_internal.h"

/* LoopStats at its largest: 2 fields of 1 tag + 10 varint bytes, the
   buckets packed (tag, length, varints of at most 10 bytes). */
#define LOOP_STATS_MAX_BYTES (2 * 11 + 2 + PERF__LOOP_BUCKETS * 10)

static perf__batch_named_loop_t *find_loop(perf__batch_loops_t *s, const char *name);
static void add_counts(perf__batch_loop_stats_t *to, const perf__batch_loop_stats_t *add);
static void add_named(perf__batch_loops_t *s, const char *name,
                      const perf__batch_loop_stats_t *stats);
static void read_stats(const Perf__V1__LoopStats *ls, perf__batch_loop_stats_t *out);

int perf__batch_add_loop_stats(perf__batch_builder_t *b, const perf__batch_loop_stats_t *stats) {
  if (!stats) return PERF_E_INVALID_ARGUMENT;
  perf__batch_loops_t *sum = calloc(1, sizeof *sum);
  if (!sum) return PERF_E_NO_MEMORY;
  sum->total = *stats;
  int err = perf__batch_add_loops(b, sum);
  free(sum);
  return err;
}

int perf__batch_add_loops(perf__batch_builder_t *b, const perf__batch_loops_t *loops) {
  if (!b || !loops) return PERF_E_INVALID_ARGUMENT;
  size_t add = b->has_loop_stats ? 0 : perf__batch_field_bytes(LOOP_STATS_MAX_BYTES);
  size_t named = b->loop_stats.n_loops;
  for (size_t i = 0; i < loops->n_loops; i++) /* each new name's room, at its largest */
    if (!find_loop(&b->loop_stats, loops->loops[i].name) && named++ < PERF__BATCH_MAX_LOOPS)
      add += perf__batch_field_bytes(LOOP_STATS_MAX_BYTES + 2 + PERF__BATCH_LOOP_NAME_BYTES);
  if (b->bytes + add > b->opts.max_bytes) return PERF_E_NO_MEMORY;
  b->bytes += add;
  if (!perf__batch_has_content(b)) b->opened_ns = perf__now_ns(); /* a stats-only batch opens */
  b->has_loop_stats = true;
  perf__batch_loops_merge(&b->loop_stats, loops);
  return PERF_OK;
}

void perf__batch_loops_add(perf__batch_loops_t *s, const char *name,
                           const perf__batch_loop_stats_t *stats) {
  add_counts(&s->total, stats);
  add_named(s, name, stats);
}

void perf__batch_loops_merge(perf__batch_loops_t *s, const perf__batch_loops_t *src) {
  add_counts(&s->total, &src->total);
  for (size_t i = 0; i < src->n_loops; i++)
    add_named(s, src->loops[i].name, &src->loops[i].stats);
}

bool perf__batch_loop_stats_of(const Perf__V1__Batch *src, perf__batch_loop_stats_t *out) {
  memset(out, 0, sizeof *out);
  const Perf__V1__LoopStats *ls = src ? src->loop_stats : NULL;
  if (!ls) return false;
  read_stats(ls, out);
  return true;
}

bool perf__batch_loops_of(const Perf__V1__Batch *src, perf__batch_loops_t *out) {
  memset(out, 0, sizeof *out);
  if (!perf__batch_loop_stats_of(src, &out->total)) return false;
  for (size_t i = 0; i < src->n_loops; i++) {
    perf__batch_loop_stats_t one = {0};
    read_stats(src->loops[i], &one);
    char name[PERF__BATCH_LOOP_NAME_BYTES + 1];
    snprintf(name, sizeof name, "%s", src->loops[i]->loop ? src->loops[i]->loop : "");
    add_named(out, name, &one);
  }
  return true;
}

bool perf__batch_has_content(const perf__batch_builder_t *b) {
  return b && (b->n_events > 0 || b->has_loop_stats);
}

/* ---- helpers -------------------------------------------------------------- */

static perf__batch_named_loop_t *find_loop(perf__batch_loops_t *s, const char *name) {
  for (size_t i = 0; i < s->n_loops; i++)
    if (strcmp(s->loops[i].name, name) == 0) return &s->loops[i];
  return NULL;
}

static void add_counts(perf__batch_loop_stats_t *to, const perf__batch_loop_stats_t *add) {
  to->watched_ns += add->watched_ns;
  to->busy_ns += add->busy_ns;
  for (size_t i = 0; i < PERF__LOOP_BUCKETS; i++)
    to->units[i] += add->units[i];
}

/* To its name's entry, a new one at the end while there is room. */
static void add_named(perf__batch_loops_t *s, const char *name,
                      const perf__batch_loop_stats_t *stats) {
  perf__batch_named_loop_t *to = find_loop(s, name);
  if (!to && s->n_loops < PERF__BATCH_MAX_LOOPS) {
    to = &s->loops[s->n_loops++];
    memset(to, 0, sizeof *to);
    snprintf(to->name, sizeof to->name, "%s", name);
  }
  if (to) add_counts(&to->stats, stats);
}

/* More than PERF__LOOP_BUCKETS buckets: the rest fold into the last. */
static void read_stats(const Perf__V1__LoopStats *ls, perf__batch_loop_stats_t *out) {
  out->watched_ns = ls->watched_nanos;
  out->busy_ns = ls->busy_nanos;
  for (size_t i = 0; i < ls->n_busy_units_by_bucket; i++) {
    size_t to = i < PERF__LOOP_BUCKETS ? i : PERF__LOOP_BUCKETS - 1;
    out->units[to] += ls->busy_units_by_bucket[i];
  }
}
