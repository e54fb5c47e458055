/*
 * rollup.c - the rollups' bucket, duration bins and query plan (rollup.h).
 */
#include "collector/model/rollup.h"

#include <math.h>
#include <stdlib.h>

int64_t rollup_bucket(int64_t ns) {
  int64_t r = ns % ROLLUP_BUCKET_NS;
  return ns - (r < 0 ? r + ROLLUP_BUCKET_NS : r);
}

int rollup_dbin(int64_t d) {
  if (d < 8) return d < 0 ? 0 : (int)d;
  int msb = 63 - __builtin_clzll((unsigned long long)d);
  return 8 * (msb - 2) + (int)((d >> (msb - 3)) & 7);
}

int64_t rollup_dbin_low(int bin) {
  if (bin < 8) return bin < 0 ? 0 : bin;
  int msb = bin / 8 + 2;
  return (int64_t)(8 + bin % 8) << (msb - 3);
}

int64_t rollup_dbin_high(int bin) {
  if (bin < 8) return rollup_dbin_low(bin);
  if (bin >= ROLLUP_DBINS - 1) return INT64_MAX;
  return rollup_dbin_low(bin + 1) - 1;
}

int64_t rollup_wall_share(int64_t duration_ns, uint64_t samples, uint64_t event_samples) {
  if (event_samples == 0) return 0;
  int64_t d = duration_ns < 0                    ? 0
              : duration_ns > ROLLUP_WALL_MAX_NS ? ROLLUP_WALL_MAX_NS
                                                 : duration_ns;
  return (int64_t)floor((double)samples * (double)d / (double)event_samples);
}

int rollup_hist_add(rollup_hist_t *h, int bin, uint64_t events) {
  for (unsigned i = 0; i < h->n; i++)
    if (h->v[i].bin == bin) return h->v[i].events += events, 0;
  if (h->n == h->cap) {
    unsigned cap = h->cap ? 2 * h->cap : 4;
    void *grown = realloc(h->v, cap * sizeof *h->v);
    if (!grown) return -1;
    h->v = grown;
    h->cap = cap;
  }
  h->v[h->n++] = (struct rollup_hist_bin_s){bin, events};
  return 0;
}

void rollup_hist_free(rollup_hist_t *h) {
  free(h->v);
  *h = (rollup_hist_t){0};
}

static int cmp_bin(const void *x, const void *y) {
  const struct rollup_hist_bin_s *a = x, *b = y;
  return (a->bin > b->bin) - (a->bin < b->bin);
}

int64_t rollup_hist_p95(rollup_hist_t *h, int64_t max_ns) {
  if (!h->n) return max_ns;
  qsort(h->v, h->n, sizeof *h->v, cmp_bin);
  uint64_t total = 0;
  for (unsigned i = 0; i < h->n; i++)
    total += h->v[i].events;
  uint64_t rank = (95 * total + 99) / 100, seen = 0;
  if (!rank) rank = 1;
  for (unsigned i = 0; i < h->n; i++) {
    seen += h->v[i].events;
    if (seen < rank) continue;
    if (i == h->n - 1) return max_ns;
    int64_t lo = rollup_dbin_low(h->v[i].bin), hi = rollup_dbin_high(h->v[i].bin);
    return lo + (hi - lo) / 2;
  }
  return max_ns;
}

bool rollup_answers(const store_top_query_t *q) {
  return !q->host && q->n_tags == 0;
}

/* The last nanosecond of the bucket starting at b. */
static int64_t bucket_end(int64_t b) {
  return b > INT64_MAX - ROLLUP_BUCKET_NS ? INT64_MAX : b + ROLLUP_BUCKET_NS - 1;
}

/* The first multiple of step at or after x (x >= 0 or not). */
static int64_t ceil_to(int64_t x, int64_t step) {
  int64_t r = x % step;
  if (r < 0) r += step;
  if (!r) return x;
  return x > INT64_MAX - (step - r) ? INT64_MAX : x + (step - r);
}

void rollup_plan(const store_top_query_t *q, int (*any_event)(void *ctx, int64_t lo, int64_t hi),
                 void *ctx, rollup_plan_t *out) {
  int64_t from = q->from_ns, to = q->to_ns;
  *out = (rollup_plan_t){.day = {1, 0}, .bucket = {{1, 0}, {1, 0}}, .raw = {{from, to}, {1, 0}}};
  if (!rollup_answers(q) || from > to) return;
  int64_t first = rollup_bucket(from), last = rollup_bucket(to);
  if (first < from && any_event(ctx, first, from - 1) != 0) {
    if (first > INT64_MAX - ROLLUP_BUCKET_NS) return;
    first += ROLLUP_BUCKET_NS;
  }
  if (bucket_end(last) > to && any_event(ctx, to + 1, bucket_end(last)) != 0) {
    if (last < INT64_MIN + ROLLUP_BUCKET_NS) return;
    last -= ROLLUP_BUCKET_NS;
  }
  if (first > last) return; /* no whole bucket: all raw */
  out->raw[0][0] = from;
  out->raw[0][1] = first - 1; /* empty when first <= from */
  if (bucket_end(last) == INT64_MAX) {
    out->raw[1][0] = 1, out->raw[1][1] = 0;
  } else {
    out->raw[1][0] = bucket_end(last) + 1;
    out->raw[1][1] = to; /* empty when the last bucket ends at or after to */
  }
  /* The whole days among the whole buckets [first, last]: a day is whole
     when its first bucket is at or after first and its last at or before
     last. */
  int64_t day_lo = ceil_to(first, ROLLUP_DAY_NS);
  if (last < INT64_MIN + ROLLUP_DAY_NS || day_lo == INT64_MAX) {
    out->bucket[0][0] = first, out->bucket[0][1] = last;
    return;
  }
  int64_t day_hi = last - (ROLLUP_DAY_NS - ROLLUP_BUCKET_NS); /* its last bucket is last */
  day_hi -= ((day_hi % ROLLUP_DAY_NS) + ROLLUP_DAY_NS) % ROLLUP_DAY_NS;
  if (day_lo > day_hi) {
    out->bucket[0][0] = first, out->bucket[0][1] = last;
    return;
  }
  out->day[0] = day_lo, out->day[1] = day_hi;
  out->bucket[0][0] = first, out->bucket[0][1] = day_lo - ROLLUP_BUCKET_NS;
  if (day_hi <= INT64_MAX - ROLLUP_DAY_NS) /* else no bucket after the last day */
    out->bucket[1][0] = day_hi + ROLLUP_DAY_NS, out->bucket[1][1] = last;
}
