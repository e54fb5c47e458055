/*
 * event_weights.c - per stack count CPU time of a weighted CPU event (see
 * event_weights.h).
 */
#include "sdk/wire/event_weights.h"

#include <stdlib.h>

typedef struct {
  uint32_t stack, tid;
  size_t count; /* index in stack_counts */
} key_t_;

static int compare_keys(const void *a, const void *b);

int perf__event_cpu_us(const Perf__V1__Event *pe, int64_t *out) {
  size_t nc = pe->n_stack_counts, ns = pe->n_sample_stacks;
  for (size_t i = 0; i < nc; i++)
    out[i] = pe->n_sample_weights_micros ? 0 : -1;
  if (!pe->n_sample_weights_micros || !nc) return 0;
  /* The counts sorted by (stack, tid), each sample found by bsearch. */
  key_t_ *keys = malloc(nc * sizeof *keys);
  if (!keys) return -1;
  for (size_t i = 0; i < nc; i++)
    keys[i] = (key_t_){pe->stack_counts[i]->stack, pe->stack_counts[i]->tid, i};
  qsort(keys, nc, sizeof *keys, compare_keys);
  for (size_t i = 0; i < ns && i < pe->n_sample_weights_micros; i++) {
    if (pe->sample_stacks[i] == 0) continue; /* a failed sample */
    key_t_ want = {pe->sample_stacks[i], pe->n_sample_tids ? pe->sample_tids[i] : pe->tid, 0};
    const key_t_ *k = bsearch(&want, keys, nc, sizeof *keys, compare_keys);
    uint64_t w = pe->sample_weights_micros[i];
    if (k)
      out[k->count] += (int64_t)(w < PERF__CPU_WEIGHT_MAX_MICROS ? w : PERF__CPU_WEIGHT_MAX_MICROS);
  }
  free(keys);
  return 0;
}

static int compare_keys(const void *a, const void *b) {
  const key_t_ *x = a, *y = b;
  if (x->stack != y->stack) return x->stack < y->stack ? -1 : 1;
  return (x->tid > y->tid) - (x->tid < y->tid);
}
