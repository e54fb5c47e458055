/*
 * top_stacks.c - GET /api/v1/top-stacks (see top_stacks.h): the store streams
 * one row per (group, version, label, duration bin), from the rollups or raw
 * events (rollup.h), ordered by group; the groups are aggregated here
 * (events, samples, CPU time, the events' durations for the mean, the bins
 * for the 95th percentile, first/last seen, distinct versions, labels),
 * sorted by impact (hang: hang_ms; cpu: cpu_us) and written with jansson.
 */
#include "collector/api/top_stacks.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/api/headline.h"
#include "collector/model/rollup.h"
#include "collector/model/signature.h"

#define MAX_LABELS 16 /* labels shown per group: those with the most events */

typedef struct seen_version_s {
  char *name;
  int64_t first_ns;
} seen_version_t;

typedef struct group_s {
  char *signature;
  json_t *frames;
  seen_version_t *versions; /* distinct, with their earliest start */
  size_t n_versions, cap_versions;
  json_t *labels; /* events per unit-of-work label */
  uint64_t events, samples, cpu_us;
  int64_t total_ns, first_ns, last_ns, max_ns;
  rollup_hist_t hist; /* events per duration bin */
} group_t;

typedef struct agg_s {
  group_t *groups;
  size_t n, cap;
  uint64_t groups_total; /* every group q matched (the store sends the heaviest) */
  query_rows_t rows;     /* the rows the store summed, and its limit */
  bool failed;
} agg_t;

_Static_assert(QUERY_LIMIT_MAX <= STORE_TOP_GROUPS_MAX, "top_rows sends every group limit shows");

static void group_free(group_t *g) {
  free(g->signature);
  json_decref(g->frames);
  for (size_t i = 0; i < g->n_versions; i++)
    free(g->versions[i].name);
  free(g->versions);
  json_decref(g->labels);
  rollup_hist_free(&g->hist);
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
  g->max_ns = INT64_MIN;
  g->signature = strdup(row->group_sig);
  g->frames = json_loads(row->names_json, 0, NULL);
  /* A hang group shows the part of its key the majority of all its
     samples share (its key is its first hang's). */
  size_t n = json_array_size(g->frames);
  for (size_t cut = row->majority_len && row->majority_len < n ? n - row->majority_len : 0; cut > 0;
       cut--)
    json_array_remove(g->frames, 0);
  g->labels = json_object();
  a->n++;
  if (!g->signature || !g->frames || !json_is_array(g->frames) || !g->labels) return NULL;
  return g;
}

/* v seen from first_ns: a new version, or an earlier start of one. */
static bool add_version(group_t *g, const char *v, int64_t first_ns) {
  for (size_t i = 0; i < g->n_versions; i++)
    if (strcmp(g->versions[i].name, v) == 0) {
      if (first_ns < g->versions[i].first_ns) g->versions[i].first_ns = first_ns;
      return true;
    }
  if (g->n_versions == g->cap_versions) {
    size_t cap = g->cap_versions ? 2 * g->cap_versions : 4;
    seen_version_t *grown = realloc(g->versions, cap * sizeof *grown);
    if (!grown) return false;
    g->versions = grown;
    g->cap_versions = cap;
  }
  char *name = strdup(v);
  if (!name) return false;
  g->versions[g->n_versions++] = (seen_version_t){name, first_ns};
  return true;
}

static bool add_label(group_t *g, const char *label, uint64_t events) {
  json_t *n = json_object_get(g->labels, label);
  if (n) return json_integer_set(n, json_integer_value(n) + (json_int_t)events) == 0;
  return json_object_set_new(g->labels, label, json_integer((json_int_t)events)) == 0;
}

static int on_row(const store_top_row_t *row, void *user) {
  agg_t *a = user;
  group_t *g = a->n ? &a->groups[a->n - 1] : NULL;
  if (!g || strcmp(g->signature, row->group_sig) != 0) g = new_group(a, row);
  if (!g) return a->failed = true, 1;
  a->groups_total = row->groups;
  query_rows_seen(&a->rows, row->rows_read, row->rows_limit);
  g->samples += row->samples;
  g->cpu_us += row->cpu_us;
  g->events += row->events;
  g->total_ns += row->total_ns;
  if (row->first_ns < g->first_ns) g->first_ns = row->first_ns;
  if (row->last_ns > g->last_ns) g->last_ns = row->last_ns;
  if (row->max_ns > g->max_ns) g->max_ns = row->max_ns;
  if (rollup_hist_add(&g->hist, row->dbin, row->events) != 0) return a->failed = true, 1;
  if (row->version && row->version[0] && !add_version(g, row->version, row->first_ns))
    return a->failed = true, 1;
  if (row->label && row->label[0] && !add_label(g, row->label, row->events))
    return a->failed = true, 1;
  return 0;
}

/* cpu: CPU time, then samples, then the events' durations. */
static int cmp_impact_cpu(const void *x, const void *y) {
  const group_t *a = x, *b = y;
  if (a->cpu_us != b->cpu_us) return a->cpu_us > b->cpu_us ? -1 : 1;
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

/* Versions in the order first seen (earliest start), ties by name. */
static int cmp_version(const void *x, const void *y) {
  const seen_version_t *a = x, *b = y;
  if (a->first_ns != b->first_ns) return a->first_ns < b->first_ns ? -1 : 1;
  return strcmp(a->name, b->name);
}

static json_t *versions_json(group_t *g) {
  if (g->n_versions > 1) qsort(g->versions, g->n_versions, sizeof *g->versions, cmp_version);
  json_t *v = json_array();
  for (size_t i = 0; v && i < g->n_versions; i++)
    if (json_array_append_new(v, json_string(g->versions[i].name)) != 0) json_decref(v), v = NULL;
  return v;
}

typedef struct label_count_s {
  const char *name;
  json_int_t events;
} label_count_t;

static int cmp_label(const void *x, const void *y) {
  const label_count_t *a = x, *b = y;
  if (a->events != b->events) return a->events > b->events ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* The MAX_LABELS labels with the most events, ties by name. */
static json_t *labels_json(const group_t *g) {
  size_t n = json_object_size(g->labels), i = 0;
  if (n <= MAX_LABELS) return json_incref(g->labels);
  label_count_t *all = malloc(n * sizeof *all);
  json_t *out = all ? json_object() : NULL;
  const char *key;
  json_t *value;
  json_object_foreach(g->labels, key, value) all[i++] =
      (label_count_t){key, json_integer_value(value)};
  if (out) qsort(all, n, sizeof *all, cmp_label);
  for (i = 0; out && i < MAX_LABELS; i++)
    if (json_object_set_new(out, all[i].name, json_integer(all[i].events)) != 0)
      json_decref(out), out = NULL;
  free(all);
  return out;
}

/* A group's own time: a cpu stack's CPU time (cpu_us), a hang group's
   hang time (hang_ms: every sample of a hang is in its group, so all of
   its duration); then the durations of the events it is in. */
static json_t *group_json(group_t *g, bool cpu) {
  json_t *o = json_pack(
      "{s:s, s:O, s:I, s:I, s:o, s:f, s:f, s:f, s:I, s:I, s:o, s:o}", "signature", g->signature,
      "frames", g->frames, "events", (json_int_t)g->events, "samples", (json_int_t)g->samples,
      cpu ? "cpu_us" : "hang_ms",
      cpu ? json_integer((json_int_t)g->cpu_us) : json_real(query_ms(g->total_ns)),
      "event_total_ms", query_ms(g->total_ns), "event_mean_ms",
      query_ms(g->total_ns) / (double)g->events, "event_p95_ms",
      query_ms(rollup_hist_p95(&g->hist, g->max_ns)), "first_seen",
      (json_int_t)(g->first_ns / 1000000), "last_seen", (json_int_t)(g->last_ns / 1000000),
      "versions", versions_json(g), "labels", labels_json(g));
  return o;
}

unsigned query_top_stacks(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body) {
  *body = NULL;
  store_top_query_t q;
  unsigned bad = query_stack_filters(arg, ctx, &q, body);
  if (bad) return bad;
  bool cpu = store_kind_cpu_time(q.kind);
  long long limit;
  if ((bad = query_limit(arg, ctx, &limit, body))) return bad;

  agg_t a = {0};
  int rc = ops->top_rows(store, &q, on_row, &a);
  json_t *stacks = json_array();
  unsigned status = 200;
  if (rc != STORE_OK || a.failed || !stacks) {
    status = 503;
  } else {
    if (a.n > 1) /* qsort's base must not be NULL, even for no rows */
      qsort(a.groups, a.n, sizeof *a.groups, cpu ? cmp_impact_cpu : cmp_impact_total);
    for (size_t i = 0; i < a.n && i < (size_t)limit; i++)
      if (json_array_append_new(stacks, group_json(&a.groups[i], cpu)) != 0) status = 503;
    if (status == 200 && headline_objects(ops, store, stacks, "signature") != 0) status = 503;
  }
  for (size_t i = 0; i < a.n; i++)
    group_free(&a.groups[i]);
  free(a.groups);
  if (status == 200) {
    size_t shown = json_array_size(stacks);
    bool cut = query_rows_cut(&a.rows);
    json_t *o = json_pack("{s:o, s:I, s:b}", "stacks", stacks, "groups_total",
                          (json_int_t)a.groups_total, "truncated", cut || a.groups_total > shown);
    if (o && cut && query_rows_json(o, &a.rows) != 0) json_decref(o), o = NULL;
    *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!*body) status = 503;
  } else {
    json_decref(stacks);
  }
  if (status == 503) *body = query_error_param("%s", "the store failed or ran out of memory");
  return status;
}
