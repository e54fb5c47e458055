/*
 * query.c - GET /api/v1/top-stacks (see query.h): the store streams one row
 * per (group, event) - or per stack_count for cpu - ordered by group; the
 * groups are aggregated here (events, samples, durations for the mean and
 * the 95th percentile, first/last seen, distinct versions), sorted by
 * impact (hang: total_ms; cpu: samples) and written with jansson.
 */
#include "query.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct group_s {
  char *signature;
  json_t *frames;
  json_t *versions; /* distinct, in the order first seen */
  uint64_t events, samples;
  int64_t total_ns, first_ns, last_ns, last_event;
  int64_t *durations; /* one per event */
  size_t n_durations, cap_durations;
} group_t;

typedef struct agg_s {
  group_t *groups;
  size_t n, cap;
  bool failed;
} agg_t;

static void group_free(group_t *g) {
  free(g->signature);
  json_decref(g->frames);
  json_decref(g->versions);
  free(g->durations);
}

static group_t *new_group(agg_t *a, const store_top_row_t *row) {
  if (a->n == a->cap) {
    size_t cap = a->cap ? 2 * a->cap : 64;
    group_t *grown = realloc(a->groups, cap * sizeof *grown);
    if (!grown) return NULL;
    a->groups = grown;
    a->cap = cap;
  }
  group_t *g = &a->groups[a->n];
  memset(g, 0, sizeof *g);
  g->first_ns = INT64_MAX;
  g->last_ns = INT64_MIN;
  g->last_event = -1;
  g->signature = strdup(row->group_sig);
  g->frames = json_loads(row->names_json, 0, NULL);
  g->versions = json_array();
  a->n++;
  if (!g->signature || !g->frames || !json_is_array(g->frames) || !g->versions) return NULL;
  return g;
}

static bool has_version(const json_t *versions, const char *v) {
  size_t i;
  json_t *x;
  json_array_foreach(versions, i, x) if (strcmp(json_string_value(x), v) == 0) return true;
  return false;
}

static int on_row(const store_top_row_t *row, void *user) {
  agg_t *a = user;
  group_t *g = a->n ? &a->groups[a->n - 1] : NULL;
  if (!g || strcmp(g->signature, row->group_sig) != 0) g = new_group(a, row);
  if (!g) return a->failed = true, 1;
  g->samples += row->samples;
  if (row->event_id == g->last_event) return 0; /* cpu: another stack_count of that event */
  g->last_event = row->event_id;
  g->events++;
  g->total_ns += row->duration_ns;
  if (row->start_ns < g->first_ns) g->first_ns = row->start_ns;
  if (row->start_ns > g->last_ns) g->last_ns = row->start_ns;
  if (g->n_durations == g->cap_durations) {
    size_t cap = g->cap_durations ? 2 * g->cap_durations : 8;
    int64_t *grown = realloc(g->durations, cap * sizeof *grown);
    if (!grown) return a->failed = true, 1;
    g->durations = grown;
    g->cap_durations = cap;
  }
  g->durations[g->n_durations++] = row->duration_ns;
  if (row->version && !has_version(g->versions, row->version) &&
      json_array_append_new(g->versions, json_string(row->version)) != 0)
    return a->failed = true, 1;
  return 0;
}

static int cmp_i64(const void *x, const void *y) {
  int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
  return (a > b) - (a < b);
}

static int cmp_impact_samples(const void *x, const void *y) {
  const group_t *a = x, *b = y;
  if (a->samples != b->samples) return a->samples > b->samples ? -1 : 1;
  if (a->total_ns != b->total_ns) return a->total_ns > b->total_ns ? -1 : 1;
  return strcmp(a->signature, b->signature);
}

static int cmp_impact_total(const void *x, const void *y) {
  const group_t *a = x, *b = y;
  if (a->total_ns != b->total_ns) return a->total_ns > b->total_ns ? -1 : 1;
  if (a->samples != b->samples) return a->samples > b->samples ? -1 : 1;
  return strcmp(a->signature, b->signature);
}

static double ms(int64_t ns) {
  return (double)ns / 1e6;
}

/* Nearest rank: the smallest duration at or above 95 % of the events. */
static int64_t p95(group_t *g) {
  qsort(g->durations, g->n_durations, sizeof *g->durations, cmp_i64);
  size_t rank = (95 * g->n_durations + 99) / 100;
  return g->durations[rank ? rank - 1 : 0];
}

static json_t *group_json(group_t *g) {
  json_t *o = json_pack("{s:s, s:O, s:I, s:I, s:f, s:f, s:f, s:I, s:I, s:O}", "signature",
                        g->signature, "frames", g->frames, "events", (json_int_t)g->events,
                        "samples", (json_int_t)g->samples, "total_ms", ms(g->total_ns), "mean_ms",
                        ms(g->total_ns) / (double)g->events, "p95_ms", ms(p95(g)), "first_seen",
                        (json_int_t)(g->first_ns / 1000000), "last_seen",
                        (json_int_t)(g->last_ns / 1000000), "versions", g->versions);
  return o;
}

/* ---- parameters ------------------------------------------------------------ */

static char *error_body(const char *fmt, const char *param) {
  char text[160];
  snprintf(text, sizeof text, fmt, param);
  json_t *o = json_pack("{s:s}", "error", text);
  char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return body;
}

/* A non-negative decimal integer up to max; false when it is not one. */
static bool parse_uint(const char *text, long long max, long long *out) {
  if (!text || !*text || *text < '0' || *text > '9') return false;
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno || *end || v < 0 || v > max) return false;
  *out = v;
  return true;
}

static const char *filter(query_arg_fn arg, void *ctx, const char *name) {
  const char *v = arg(ctx, name);
  return v && *v ? v : NULL;
}

/* Milliseconds to nanoseconds fit int64 up to about year 2262. */
#define MAX_MS (INT64_MAX / 1000000)

unsigned query_top_stacks(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body) {
  *body = NULL;
  store_top_query_t q = {NULL, NULL, NULL, NULL, 0, INT64_MAX};
  const char *kind = arg(ctx, "kind");
  if (!kind || (strcmp(kind, "hang") != 0 && strcmp(kind, "cpu") != 0))
    return *body = error_body("parameter %s: must be hang or cpu", "kind"), 400;
  q.kind = kind;
  q.app = filter(arg, ctx, "app");
  q.version = filter(arg, ctx, "version");
  q.environment = filter(arg, ctx, "environment");
  long long v;
  const char *from = arg(ctx, "from"), *to = arg(ctx, "to"), *limit_text = arg(ctx, "limit");
  if (from) {
    if (!parse_uint(from, MAX_MS, &v))
      return *body = error_body("parameter %s: must be unix milliseconds", "from"), 400;
    q.from_ns = (int64_t)v * 1000000;
  }
  if (to) {
    if (!parse_uint(to, MAX_MS, &v))
      return *body = error_body("parameter %s: must be unix milliseconds", "to"), 400;
    q.to_ns = (int64_t)v * 1000000 + 999999; /* the whole millisecond */
  }
  if (q.from_ns > q.to_ns)
    return *body = error_body("parameter %s: must not be before from", "to"), 400;
  long long limit = QUERY_LIMIT_DEFAULT;
  if (limit_text && (!parse_uint(limit_text, QUERY_LIMIT_MAX, &limit) || limit < 1))
    return *body = error_body("parameter %s: must be 1..1000", "limit"), 400;

  agg_t a = {0};
  int rc = ops->top_rows(store, &q, on_row, &a);
  json_t *stacks = json_array();
  unsigned status = 200;
  if (rc != STORE_OK || a.failed || !stacks) {
    status = 503;
  } else {
    if (a.n > 1) /* qsort's base must not be NULL, even for no rows */
      qsort(a.groups, a.n, sizeof *a.groups,
            strcmp(kind, "cpu") == 0 ? cmp_impact_samples : cmp_impact_total);
    for (size_t i = 0; i < a.n && i < (size_t)limit; i++)
      if (json_array_append_new(stacks, group_json(&a.groups[i])) != 0) status = 503;
  }
  for (size_t i = 0; i < a.n; i++)
    group_free(&a.groups[i]);
  free(a.groups);
  if (status == 200) {
    json_t *o = json_pack("{s:o}", "stacks", stacks);
    *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!*body) status = 503;
  } else {
    json_decref(stacks);
  }
  if (status == 503) *body = error_body("%s", "the store failed or ran out of memory");
  return status;
}
