/*
 * sample_states.c - per-sample thread states counted per thread and state
 * (see sample_states.h): one key per sample (a profile: per stack count),
 * sorted, then counted in runs, so a hostile batch of distinct keys costs
 * n log n.
 */
#include "collector/ingest/sample_states.h"

#include "sdk/wire/state_text.h"

#include <stdlib.h>
#include <string.h>

typedef struct key_s {
  uint32_t tid, syscall; /* syscall: its string index */
  int state, fd;
  size_t index; /* the sample's, or the stack count's */
} key_t_;

static int compare_keys(const void *a, const void *b);
static int compare_counts(const void *a, const void *b);

/* keys[0..count) (malloc'ed, freed here), each weighing samples[i] (NULL:
   1), counted per key into *out, most samples first. */
static int tally(const Perf__V1__Batch *bt, key_t_ *keys, const uint64_t *samples, size_t count,
                 store_state_count_t **out, size_t *n) {
  store_state_count_t *rows = malloc(count * sizeof *rows);
  if (!rows) {
    free(keys);
    return -1;
  }
  qsort(keys, count, sizeof *keys, compare_keys);
  size_t rows_n = 0;
  for (size_t i = 0; i < count; i++) {
    if (i == 0 || compare_keys(&keys[i - 1], &keys[i]) != 0) {
      const key_t_ *k = &keys[i];
      rows[rows_n++] =
          (store_state_count_t){k->tid, perf__state_name(k->state),
                                k->syscall ? bt->strings[k->syscall] : "", perf__fd_name(k->fd), 0};
    }
    rows[rows_n - 1].samples += samples ? samples[keys[i].index] : 1;
  }
  free(keys);
  qsort(rows, rows_n, sizeof *rows, compare_counts);
  *out = rows;
  *n = rows_n;
  return 0;
}

int sample_states_count(const Perf__V1__Batch *bt, const Perf__V1__Event *e,
                        store_state_count_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  size_t count = e->n_sample_states;
  if (count == 0 || count != e->n_sample_stacks) return 0;
  key_t_ *keys = malloc(count * sizeof *keys);
  if (!keys) return -1;
  for (size_t i = 0; i < count; i++) {
    int state = e->sample_states[i];
    keys[i] = (key_t_){e->n_sample_tids ? e->sample_tids[i] : e->tid,
                       e->n_sample_syscalls ? e->sample_syscalls[i] : 0,
                       strcmp(perf__state_name(state), "unknown") == 0 ? 0 : state,
                       e->n_sample_fds ? e->sample_fds[i] : 0, i};
    if (keys[i].state <= 1) keys[i].syscall = 0, keys[i].fd = 0; /* unknown, running */
    if (keys[i].syscall >= bt->n_strings) keys[i].syscall = 0;
    if (!perf__fd_name(keys[i].fd)[0]) keys[i].fd = 0;
  }
  return tally(bt, keys, NULL, count, out, n);
}

int sample_states_of_counts(const Perf__V1__Event *e, store_state_count_t **out, size_t *n) {
  *out = NULL;
  *n = 0;
  size_t count = 0, known = 0;
  for (size_t i = 0; i < e->n_stack_counts; i++) {
    count += e->stack_counts[i]->samples != 0;
    known += e->stack_counts[i]->samples && e->stack_counts[i]->state != 0;
  }
  if (known == 0) return 0; /* every state unknown: none, as an older SDK's */
  key_t_ *keys = malloc(count * sizeof *keys);
  uint64_t *samples = malloc(e->n_stack_counts * sizeof *samples);
  if (!keys || !samples) {
    free(keys);
    free(samples);
    return -1;
  }
  size_t k = 0;
  for (size_t i = 0; i < e->n_stack_counts; i++) {
    const Perf__V1__StackCount *c = e->stack_counts[i];
    samples[i] = c->samples;
    if (c->samples) keys[k++] = (key_t_){c->tid, 0, (int)c->state, 0, i};
  }
  int rc = tally(NULL, keys, samples, count, out, n);
  free(samples);
  return rc;
}

static int compare_keys(const void *a, const void *b) {
  const key_t_ *x = a, *y = b;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  if (x->state != y->state) return x->state < y->state ? -1 : 1;
  if (x->syscall != y->syscall) return x->syscall < y->syscall ? -1 : 1;
  return (x->fd > y->fd) - (x->fd < y->fd);
}

/* Most samples first; ties by thread, then state, call and descriptor
   names, so the order is the same in every run. */
static int compare_counts(const void *a, const void *b) {
  const store_state_count_t *x = a, *y = b;
  if (x->samples != y->samples) return x->samples > y->samples ? -1 : 1;
  if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
  int c = strcmp(x->state, y->state);
  if (!c) c = strcmp(x->syscall, y->syscall);
  return c ? c : strcmp(x->fd, y->fd);
}
