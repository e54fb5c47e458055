/*
 * rollup_batch.c - a batch's rollup rows (rollup_batch.h): one row per
 * event (hang) or per event and count (cpu, stacks), sorted by key and
 * merged, as rollup_sql.h's GROUP BY does over the raw rows.
 */
#include "collector/model/rollup_batch.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/rollup.h"

int64_t rollup_bucket_at(int64_t ns, int64_t size_ns) {
  int64_t r = ns % size_ns;
  return ns - (r < 0 ? r + size_ns : r);
}

int rollup_picks_init(rollup_picks_t *p, const store_batch_t *b) {
  p->picked = calloc(b->n_events + 1, sizeof *p->picked);
  p->group = calloc(b->n_events + 1, sizeof *p->group);
  if (!p->picked || !p->group) {
    rollup_picks_free(p);
    return -1;
  }
  for (size_t i = 0; i < b->n_events; i++)
    p->group[i] = b->events[i].hang ? p->picked[i] : b->events[i].group_sig;
  return 0;
}

void rollup_picks_free(rollup_picks_t *p) {
  free(p->picked);
  free(p->group);
  *p = (rollup_picks_t){0};
}

/* A count's CPU time: its samples' weights, 0 without (ROLLUP_CPU). */
static int64_t cpu_of(const store_stack_count_t *c) {
  return c->cpu_us >= 0 ? c->cpu_us : 0;
}

static const char *or_empty(const char *s) {
  return s ? s : "";
}

static int cmp_i64(int64_t a, int64_t b) {
  return (a > b) - (a < b);
}

/* Group rows before merging: the event they come from, so an event
   counts once per key however many of its counts (threads) fall there. */
typedef struct {
  rollup_group_row_t row;
  size_t event;
} group_pre_t;

static int cmp_group_key(const rollup_group_row_t *a, const rollup_group_row_t *b) {
  int c = cmp_i64(a->bucket_ns, b->bucket_ns);
  if (!c) c = strcmp(a->kind, b->kind);
  if (!c) c = strcmp(a->group_sig, b->group_sig);
  if (!c) c = strcmp(a->label, b->label);
  if (!c) c = (a->dbin > b->dbin) - (a->dbin < b->dbin);
  return c;
}

static int cmp_group(const void *x, const void *y) {
  const group_pre_t *a = x, *b = y;
  int c = cmp_group_key(&a->row, &b->row);
  return c ? c : (a->event > b->event) - (a->event < b->event);
}

static int cmp_stack(const void *x, const void *y) {
  const rollup_stack_row_t *a = x, *b = y;
  int c = cmp_i64(a->bucket_ns, b->bucket_ns);
  if (!c) c = strcmp(a->kind, b->kind);
  if (!c) c = strcmp(a->group_sig, b->group_sig);
  if (!c) c = strcmp(a->stack_sig, b->stack_sig);
  if (!c) c = strcmp(a->label, b->label);
  return c;
}

static int64_t min64(int64_t a, int64_t b) {
  return a < b ? a : b;
}

static int64_t max64(int64_t a, int64_t b) {
  return a > b ? a : b;
}

/* pre[0..n) sorted, merged into out (its length). */
static size_t merge_groups(group_pre_t *pre, size_t n, rollup_group_row_t *out) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    const rollup_group_row_t *r = &pre[i].row;
    if (!m || cmp_group_key(&out[m - 1], r) != 0) {
      out[m++] = *r;
      continue;
    }
    rollup_group_row_t *o = &out[m - 1];
    o->samples += r->samples;
    o->cpu_us += r->cpu_us;
    if (pre[i - 1].event == pre[i].event) continue; /* the same event's other thread */
    o->events += r->events;
    o->total_ns += r->total_ns;
    o->first_ns = min64(o->first_ns, r->first_ns);
    o->last_ns = max64(o->last_ns, r->last_ns);
    o->max_ns = max64(o->max_ns, r->max_ns);
  }
  return m;
}

static size_t merge_stacks(rollup_stack_row_t *pre, size_t n) {
  size_t m = 0;
  for (size_t i = 0; i < n; i++) {
    if (m && cmp_stack(&pre[m - 1], &pre[i]) == 0) {
      rollup_stack_row_t *o = &pre[m - 1];
      o->samples += pre[i].samples;
      o->cpu_us += pre[i].cpu_us;
      o->wall_ns += pre[i].wall_ns;
      o->first_ns = min64(o->first_ns, pre[i].first_ns);
      o->last_end_ns = max64(o->last_end_ns, pre[i].last_end_ns);
    } else {
      pre[m++] = pre[i];
    }
  }
  return m;
}

/* The event's end, saturated (the SQL's start_ns + duration_ns). */
static int64_t end_of(const store_event_t *e) {
  if (e->duration_ns > 0 && e->start_ns > INT64_MAX - e->duration_ns) return INT64_MAX;
  if (e->duration_ns < 0 && e->start_ns < INT64_MIN - e->duration_ns) return INT64_MIN;
  return e->start_ns + e->duration_ns;
}

static bool is_hang(const char *kind) {
  return !strcmp(kind, "hang") || !strcmp(kind, "fatal_hang");
}

int rollup_batch_build(rollup_batch_t *out, const store_batch_t *b, const char *const *group,
                       int64_t size_ns) {
  *out = (rollup_batch_t){0};
  size_t n_counts = 0;
  for (size_t i = 0; i < b->n_events; i++)
    n_counts += b->events[i].n_counts;
  group_pre_t *pre = malloc((b->n_events + n_counts + 1) * sizeof *pre);
  rollup_stack_row_t *stacks = malloc((n_counts + 1) * sizeof *stacks);
  rollup_group_row_t *groups = malloc((b->n_events + n_counts + 1) * sizeof *groups);
  if (!pre || !stacks || !groups) {
    free(pre), free(stacks), free(groups);
    return -1;
  }
  size_t np = 0, ns = 0;
  for (size_t i = 0; i < b->n_events; i++) {
    const store_event_t *e = &b->events[i];
    int64_t bucket = rollup_bucket_at(e->start_ns, size_ns), d = e->duration_ns;
    const char *label = or_empty(e->label);
    rollup_group_row_t base = {.bucket_ns = bucket,
                               .kind = e->kind,
                               .label = label,
                               .dbin = rollup_dbin(d),
                               .events = 1,
                               .total_ns = d,
                               .first_ns = e->start_ns,
                               .last_ns = e->start_ns,
                               .max_ns = d};
    int64_t samples = 0;
    for (size_t j = 0; j < e->n_counts; j++)
      samples += e->counts[j].samples;
    if (is_hang(e->kind) && group[i]) {
      pre[np].row = base;
      pre[np].row.group_sig = group[i];
      pre[np].row.samples = samples;
      pre[np++].event = i;
    }
    bool cpu = store_kind_cpu_time(e->kind);
    for (size_t j = 0; j < e->n_counts; j++) {
      const store_stack_count_t *c = &e->counts[j];
      if (cpu) {
        pre[np].row = base;
        pre[np].row.group_sig = c->stack_sig;
        pre[np].row.samples = c->samples;
        pre[np].row.cpu_us = cpu_of(c);
        pre[np++].event = i;
      }
      stacks[ns++] = (rollup_stack_row_t){
          .bucket_ns = bucket,
          .kind = e->kind,
          .group_sig = or_empty(group[i]),
          .stack_sig = c->stack_sig,
          .label = label,
          .samples = c->samples,
          .cpu_us = cpu_of(c),
          .wall_ns = rollup_wall_share(d, c->samples, (uint64_t)samples),
          .first_ns = e->start_ns,
          .last_end_ns = end_of(e),
      };
    }
  }
  qsort(pre, np, sizeof *pre, cmp_group);
  qsort(stacks, ns, sizeof *stacks, cmp_stack);
  out->n_groups = merge_groups(pre, np, groups);
  out->groups = groups;
  out->n_stacks = merge_stacks(stacks, ns);
  out->stacks = stacks;
  free(pre);
  return 0;
}

void rollup_batch_free(rollup_batch_t *rb) {
  free(rb->groups);
  free(rb->stacks);
  *rb = (rollup_batch_t){0};
}
