/*
 * event.c - building events: samples, per-thread deduplicated stacks, the
 * dominant stack (see event.h). Runs on whichever thread builds the event.
 */
#include "sdk/pipeline/event.h"

#include <stdlib.h>
#include <string.h>

#include "perf_sdk.h"

static int grow(void **items, size_t *cap, size_t need, size_t item_size, size_t max);
static uint64_t hash_stack(pid_t tid, const uintptr_t *pcs, size_t n, perf__stack_end_t end);
static int find_or_add_stack(perf__event_t *ev, pid_t tid, const uintptr_t *pcs, size_t n,
                             perf__stack_end_t end, perf__state_t state);
static int compare_stacks(const void *a, const void *b, void *stacks);
static int compare_weights(const void *a, const void *b, void *stacks);

perf__event_t *perf__event_new(perf__event_kind_t kind, perf__modules_t *mods) {
  perf__event_t *ev = calloc(1, sizeof *ev);
  if (!ev) return NULL;
  ev->kind = kind;
  ev->cpu_percent = -1;
  if (mods) {
    atomic_fetch_add(&mods->refs, 1);
    ev->mods = mods;
  }
  return ev;
}

int perf__event_add_sample(perf__event_t *ev, pid_t tid, int64_t mono_ns, const uintptr_t *pcs,
                           size_t n, perf__stack_end_t end) {
  return perf__event_add_sample_state(ev, tid, mono_ns, pcs, n, end, PERF__SAMPLE_STATE_UNKNOWN);
}

int perf__event_add_sample_state(perf__event_t *ev, pid_t tid, int64_t mono_ns,
                                 const uintptr_t *pcs, size_t n, perf__stack_end_t end,
                                 perf__sample_state_t state) {
  return perf__event_add_weighted_sample(ev, tid, mono_ns, pcs, n, end, state, 0);
}

int perf__event_add_weighted_sample(perf__event_t *ev, pid_t tid, int64_t mono_ns,
                                    const uintptr_t *pcs, size_t n, perf__stack_end_t end,
                                    perf__sample_state_t state, uint64_t weight_ns) {
  if (ev->sample_count == PERF__EVENT_MAX_SAMPLES) {
    ev->samples_over++;
    return PERF_OK;
  }
  if (n > PERF__EVENT_MAX_DEPTH) {
    n = PERF__EVENT_MAX_DEPTH;
    end = PERF__STACK_END_DEPTH;
  }
  int stack = find_or_add_stack(ev, tid, pcs, n, end, PERF__STATE_UNKNOWN);
  if (stack < 0) return stack;
  int err = grow((void **)&ev->samples, &ev->sample_cap, ev->sample_count + 1, sizeof *ev->samples,
                 PERF__EVENT_MAX_SAMPLES);
  if (err) return err;
  ev->samples[ev->sample_count++] = (perf__sample_t){mono_ns, tid, stack, 0, state, weight_ns};
  ev->stacks[stack].samples++;
  ev->stacks[stack].weight_ns += weight_ns;
  return PERF_OK;
}

void perf__event_add_weight(perf__event_t *ev, size_t i, uint64_t weight_ns) {
  if (i >= ev->sample_count || ev->samples[i].stack < 0) return;
  ev->samples[i].weight_ns += weight_ns;
  ev->stacks[ev->samples[i].stack].weight_ns += weight_ns;
}

int perf__event_add_count(perf__event_t *ev, pid_t tid, perf__state_t state, const uintptr_t *pcs,
                          size_t n, perf__stack_end_t end, uint32_t samples, uint64_t weight_ns) {
  if (n > PERF__EVENT_MAX_DEPTH) {
    n = PERF__EVENT_MAX_DEPTH;
    end = PERF__STACK_END_DEPTH;
  }
  int stack = find_or_add_stack(ev, tid, pcs, n, end, state);
  if (stack < 0) return stack;
  ev->stacks[stack].samples += samples;
  ev->stacks[stack].weight_ns += weight_ns;
  return PERF_OK;
}

int perf__event_add_failed_sample(perf__event_t *ev, pid_t tid, int64_t mono_ns, int error) {
  if (ev->sample_count == PERF__EVENT_MAX_SAMPLES) {
    ev->samples_over++;
    return PERF_OK;
  }
  int err = grow((void **)&ev->samples, &ev->sample_cap, ev->sample_count + 1, sizeof *ev->samples,
                 PERF__EVENT_MAX_SAMPLES);
  if (err) return err;
  ev->samples[ev->sample_count++] =
      (perf__sample_t){mono_ns, tid, -1, error, PERF__SAMPLE_STATE_UNKNOWN, 0};
  return PERF_OK;
}

int perf__event_set_thread(perf__event_t *ev, pid_t tid, const char *name, int cpu_percent) {
  perf__thread_t *t = NULL;
  for (size_t i = 0; i < ev->thread_count && !t; i++)
    if (ev->threads[i].tid == tid) t = &ev->threads[i];
  if (!t) {
    if (ev->thread_count == PERF__EVENT_MAX_THREADS) return PERF_OK;
    perf__thread_t *grown = realloc(ev->threads, (ev->thread_count + 1) * sizeof *grown);
    if (!grown) return PERF_E_NO_MEMORY;
    ev->threads = grown;
    t = &ev->threads[ev->thread_count++];
    memset(t, 0, sizeof *t);
    t->tid = tid;
  }
  if (name) {
    strncpy(t->name, name, sizeof t->name - 1);
    t->name[sizeof t->name - 1] = '\0';
  }
  t->cpu_percent = cpu_percent;
  return PERF_OK;
}

void perf__event_finish(perf__event_t *ev) {
  size_t n = ev->stack_count;
  if (n < 2) return;
  /* Sort stack indices, then move the stacks and remap the samples. */
  uint32_t *by_rank = malloc(n * sizeof *by_rank), *rank_of = malloc(n * sizeof *rank_of);
  perf__stack_t *sorted = malloc(n * sizeof *sorted);
  if (by_rank && rank_of && sorted) {
    for (size_t i = 0; i < n; i++)
      by_rank[i] = (uint32_t)i;
    qsort_r(by_rank, n, sizeof *by_rank, ev->weighted ? compare_weights : compare_stacks,
            ev->stacks);
    for (size_t r = 0; r < n; r++) {
      sorted[r] = ev->stacks[by_rank[r]];
      rank_of[by_rank[r]] = (uint32_t)r;
    }
    memcpy(ev->stacks, sorted, n * sizeof *sorted);
    for (size_t i = 0; i < ev->sample_count; i++)
      if (ev->samples[i].stack >= 0) ev->samples[i].stack = (int32_t)rank_of[ev->samples[i].stack];
  } /* out of memory: the stacks stay in capture order */
  free(by_rank);
  free(rank_of);
  free(sorted);
}

perf__event_t *perf__event_clone(const perf__event_t *ev) {
  perf__event_t *c = perf__event_new(ev->kind, ev->mods);
  if (!c) return NULL;
  perf__modules_t *mods = c->mods;
  *c = *ev;
  c->mods = mods;
  c->threads = NULL;
  c->samples = NULL;
  c->stacks = NULL;
  c->frames = NULL;
  c->sample_cap = c->sample_count;
  c->stack_cap = c->stack_count;
  c->frame_cap = c->frame_count;
#define COPY(field, n)                                                                             \
  if ((n) && !(c->field = malloc((n) * sizeof *ev->field))) goto fail;                             \
  if (n) memcpy(c->field, ev->field, (n) * sizeof *ev->field)
  COPY(threads, ev->thread_count);
  COPY(samples, ev->sample_count);
  COPY(stacks, ev->stack_count);
  COPY(frames, ev->frame_count);
#undef COPY
  return c;
fail:
  perf__event_free(c);
  return NULL;
}

size_t perf__event_good_samples(const perf__event_t *ev) {
  size_t n = 0;
  for (size_t i = 0; i < ev->sample_count; i++)
    n += ev->samples[i].stack >= 0;
  return n;
}

void perf__event_free(perf__event_t *ev) {
  if (!ev) return;
  perf__modules_release(ev->mods);
  free(ev->threads);
  free(ev->samples);
  free(ev->stacks);
  free(ev->frames);
  free(ev);
}

const char *perf__event_kind_name(perf__event_kind_t kind) {
  switch (kind) {
  case PERF__EVENT_HANG: return "hang";
  case PERF__EVENT_FATAL_HANG: return "fatal_hang";
  case PERF__EVENT_CPU: return "cpu";
  case PERF__EVENT_MANUAL: return "manual";
  case PERF__EVENT_PROFILE: return "profile";
  }
  return "unknown";
}

static int grow(void **items, size_t *cap, size_t need, size_t item_size, size_t max) {
  if (need <= *cap) return PERF_OK;
  if (need > max) return PERF_E_NO_MEMORY;
  size_t c = *cap ? *cap * 2 : 16;
  while (c < need)
    c *= 2;
  if (c > max) c = max;
  void *grown = realloc(*items, c * item_size);
  if (!grown) return PERF_E_NO_MEMORY;
  *items = grown;
  *cap = c;
  return PERF_OK;
}

static uint64_t hash_stack(pid_t tid, const uintptr_t *pcs, size_t n, perf__stack_end_t end) {
  uint64_t h = 1469598103934665603ULL ^ (uint64_t)tid ^ (uint64_t)end << 32; /* FNV-1a, words */
  for (size_t i = 0; i < n; i++)
    h = (h ^ pcs[i]) * 1099511628211ULL;
  return h;
}

/* Index of the stack (tid, pcs, end, state), added when new; negative on
   error. */
static int find_or_add_stack(perf__event_t *ev, pid_t tid, const uintptr_t *pcs, size_t n,
                             perf__stack_end_t end, perf__state_t state) {
  uint64_t h = hash_stack(tid, pcs, n, end);
  for (size_t i = 0; i < ev->stack_count; i++) {
    const perf__stack_t *s = &ev->stacks[i];
    if (s->hash == h && s->tid == tid && s->depth == n && s->end == end && s->state == state &&
        memcmp(&ev->frames[s->first], pcs, n * sizeof *pcs) == 0)
      return (int)i;
  }
  int err = grow((void **)&ev->stacks, &ev->stack_cap, ev->stack_count + 1, sizeof *ev->stacks,
                 PERF__EVENT_MAX_SAMPLES);
  if (!err)
    err = grow((void **)&ev->frames, &ev->frame_cap, ev->frame_count + n, sizeof *ev->frames,
               (size_t)PERF__EVENT_MAX_SAMPLES * PERF__EVENT_MAX_DEPTH);
  if (err) return err;
  memcpy(&ev->frames[ev->frame_count], pcs, n * sizeof *pcs);
  ev->stacks[ev->stack_count] =
      (perf__stack_t){tid, (uint32_t)ev->frame_count, (uint32_t)n, 0, h, end, 0, state};
  ev->frame_count += n;
  return (int)ev->stack_count++;
}

/* Most samples first; on a tie, the stack seen first. */
static int compare_stacks(const void *a, const void *b, void *stacks) {
  uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
  const perf__stack_t *x = (const perf__stack_t *)stacks + i,
                      *y = (const perf__stack_t *)stacks + j;
  if (x->samples != y->samples) return x->samples > y->samples ? -1 : 1;
  return (i > j) - (i < j);
}

/* Weighted events: most CPU time first, then as compare_stacks. */
static int compare_weights(const void *a, const void *b, void *stacks) {
  uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
  const perf__stack_t *x = (const perf__stack_t *)stacks + i,
                      *y = (const perf__stack_t *)stacks + j;
  if (x->weight_ns != y->weight_ns) return x->weight_ns > y->weight_ns ? -1 : 1;
  return compare_stacks(a, b, stacks);
}
