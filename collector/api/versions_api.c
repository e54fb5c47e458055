/*
 * versions_api.c - GET /api/v1/versions/compare (see versions_api.h): two
 * versions of one app side by side, each with how long its loops were
 * watched (the batches' loop stats), its hangs, hangs per hour of watched
 * time with its exact 95% interval, busy fraction and the units of work
 * by duration bucket; whether b's rate differs from a's beyond noise
 * (difference); then the hang groups whose share of the hangs grew or
 * shrank the most from a to b. With loop=NAME: that loop's watched time
 * and hangs (store.h loop_totals); the groups that moved stay those of
 * every loop's hangs, as the rollups they come from keep no loop. Runs on
 * the MHD worker of the request; the store serializes itself.
 */
#include "collector/api/versions_api.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/api/headline.h"
#include "collector/api/loop_json.h"
#include "collector/model/rate_interval.h"

#define MAX_VERSION_BYTES 256 /* a and b: longer is no version an SDK sends */
#define NS_PER_HOUR 3.6e12
#define STR_(x) #x
#define STR(x) STR_(x)
#define TOO_LONG "parameter %s: at most " STR(MAX_VERSION_BYTES) " bytes"

/* ---- parameters ------------------------------------------------------------ */

static unsigned check_version(const char *name, const char *v, char **body) {
  if (!v || !*v)
    return *body = query_error_param("parameter %s: required (a version of the app)", name), 400;
  if (strlen(v) > MAX_VERSION_BYTES) return *body = query_error_param(TOO_LONG, name), 400;
  return 0;
}

static unsigned parse_compare(query_arg_fn arg, void *ctx, store_top_query_t *q, const char **a,
                              const char **b, char **body) {
  unsigned bad = query_event_filters(arg, ctx, q, body);
  if (bad) return bad;
  static const char *const REFUSED[] = {"kind", "version", "group", "label"};
  for (size_t i = 0; i < sizeof REFUSED / sizeof REFUSED[0]; i++) {
    const char *v = arg(ctx, REFUSED[i], 0);
    if (v && *v)
      return *body =
                 query_error_param("parameter %s: not a filter of versions/compare", REFUSED[i]),
             400;
  }
  q->kind = NULL;
  if (!q->app)
    return *body = query_error_param("parameter %s: required (the app's name)", "app"), 400;
  if (strlen(q->app) > MAX_VERSION_BYTES) return *body = query_error_param(TOO_LONG, "app"), 400;
  *a = arg(ctx, "a", 0);
  *b = arg(ctx, "b", 0);
  if ((bad = check_version("a", *a, body)) || (bad = check_version("b", *b, body))) return bad;
  if (strcmp(*a, *b) == 0)
    return *body = query_error_param("parameter %s: must differ from a", "b"), 400;
  return 0;
}

/* ---- one version ------------------------------------------------------------ */

/* Hangs per hang group of one version (top_rows: events per row). */
typedef struct groups_s {
  json_t *by_sig; /* signature -> {"frames": [...], "hangs": [a, b]} */
  size_t side;    /* 0: version a, 1: b */
  uint64_t total[2];
  query_rows_t rows[2]; /* each side's rows the store summed, and its limit */
  bool failed;
} groups_t;

static int on_hang(const store_top_row_t *row, void *user) {
  groups_t *g = user;
  query_rows_seen(&g->rows[g->side], row->rows_read, row->rows_limit);
  json_t *entry = json_object_get(g->by_sig, row->group_sig);
  if (!entry) {
    json_t *frames = json_loads(row->names_json, 0, NULL);
    entry = json_pack("{s:o,s:[ii]}", "frames", frames ? frames : json_array(), "hangs", 0, 0);
    if (!entry || json_object_set_new(g->by_sig, row->group_sig, entry) != 0)
      return g->failed = true, 1;
  }
  json_t *n = json_array_get(json_object_get(entry, "hangs"), g->side);
  json_integer_set(n, json_integer_value(n) + (json_int_t)row->events);
  g->total[g->side] += row->events;
  return 0;
}

/* {"version", then the loop's totals (loop_json.h)}. */
static json_t *version_json(const char *version, const store_loop_totals_t *t) {
  json_t *o = json_pack("{s:s}", "version", version), *totals = loop_totals_json(t);
  if (!o || !totals || json_object_update(o, totals) != 0) json_decref(o), o = NULL;
  json_decref(totals);
  return o;
}

/* How b's hang rate stands against a's (rate_interval.h): "higher" or
   "lower" when their 95% intervals do not overlap, "within_noise" when
   they do, "not_enough_data" when a side has too few hangs or too little
   watched time to say. */
static const char *difference(const store_loop_totals_t t[2]) {
  double low[2], high[2];
  for (int i = 0; i < 2; i++) {
    double hours = (double)t[i].sum.watched_ns / NS_PER_HOUR;
    if (!rate_enough_data(t[i].hangs, hours)) return "not_enough_data";
    rate_poisson_interval(t[i].hangs, &low[i], &high[i]);
    low[i] /= hours, high[i] /= hours;
  }
  int c = rate_compare(low[0], high[0], low[1], high[1]);
  return c > 0 ? "higher" : c < 0 ? "lower" : "within_noise";
}

/* ---- the groups that moved --------------------------------------------------- */

typedef struct moved_s {
  const char *sig;
  json_t *entry;
  double change; /* share in b minus share in a */
} moved_t;

static int cmp_grew(const void *x, const void *y) {
  const moved_t *a = x, *b = y;
  if (a->change != b->change) return a->change < b->change ? 1 : -1;
  return strcmp(a->sig, b->sig);
}

static json_t *moved_json(const moved_t *m, const groups_t *g) {
  json_t *hangs = json_object_get(m->entry, "hangs");
  json_int_t na = json_integer_value(json_array_get(hangs, 0));
  json_int_t nb = json_integer_value(json_array_get(hangs, 1));
  return json_pack("{s:s,s:O,s:I,s:I,s:f,s:f,s:f}", "group", m->sig, "frames",
                   json_object_get(m->entry, "frames"), "hangs_a", na, "hangs_b", nb, "share_a",
                   g->total[0] ? (double)na / (double)g->total[0] : 0.0, "share_b",
                   g->total[1] ? (double)nb / (double)g->total[1] : 0.0, "change", m->change);
}

/* {"grew": [...], "shrank": [...]}: the groups whose share rose (fell) the
   most, at most VERSIONS_MAX_MOVED each, largest change first (ties: by
   signature). */
static json_t *stacks_json(const groups_t *g) {
  size_t n = json_object_size(g->by_sig), k = 0;
  moved_t *m = calloc(n ? n : 1, sizeof *m);
  json_t *grew = json_array(), *shrank = json_array();
  const char *sig;
  json_t *entry;
  json_object_foreach(g->by_sig, sig, entry) {
    if (!m) break;
    json_t *hangs = json_object_get(entry, "hangs");
    double sa = g->total[0]
                    ? (double)json_integer_value(json_array_get(hangs, 0)) / (double)g->total[0]
                    : 0;
    double sb = g->total[1]
                    ? (double)json_integer_value(json_array_get(hangs, 1)) / (double)g->total[1]
                    : 0;
    m[k++] = (moved_t){sig, entry, sb - sa};
  }
  json_t *out = NULL;
  if (m && grew && shrank) {
    qsort(m, k, sizeof *m, cmp_grew);
    for (size_t i = 0; i < k && json_array_size(grew) < VERSIONS_MAX_MOVED && m[i].change > 0; i++)
      json_array_append_new(grew, moved_json(&m[i], g));
    for (size_t i = k; i-- > 0 && json_array_size(shrank) < VERSIONS_MAX_MOVED && m[i].change < 0;)
      json_array_append_new(shrank, moved_json(&m[i], g));
    out = json_pack("{s:O,s:O}", "grew", grew, "shrank", shrank);
  }
  json_decref(grew);
  json_decref(shrank);
  free(m);
  return out;
}

unsigned versions_compare(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body) {
  *body = NULL;
  store_top_query_t q;
  const char *a = NULL, *b = NULL;
  unsigned bad = parse_compare(arg, ctx, &q, &a, &b, body);
  if (bad) return bad;
  const char *versions[2] = {a, b};
  store_loop_totals_t totals[2];
  groups_t g = {.by_sig = json_object()};
  int rc = g.by_sig ? STORE_OK : STORE_ERROR;
  for (size_t i = 0; rc == STORE_OK && i < 2; i++) {
    q.version = versions[i];
    rc = ops->loop_totals(store, &q, &totals[i]);
    q.kind = "hang";
    g.side = i;
    if (rc == STORE_OK) rc = ops->top_rows(store, &q, on_hang, &g);
    q.kind = NULL;
  }
  json_t *o = NULL;
  if (rc == STORE_OK && !g.failed)
    o = json_pack("{s:s,s:s?,s:s?,s:[oo],s:s,s:o}", "app", q.app, "environment", q.environment,
                  "loop", q.loop, "versions", version_json(a, &totals[0]),
                  version_json(b, &totals[1]), "difference", difference(totals), "stacks",
                  stacks_json(&g));
  json_decref(g.by_sig);
  json_t *moved = json_object_get(o, "stacks");
  /* A side whose read stopped at the row limit: the groups that moved are
     those of the rows read (the side that read more says how many). */
  const query_rows_t *cut = query_rows_cut(&g.rows[1]) ? &g.rows[1] : &g.rows[0];
  if (moved && query_rows_cut(cut) &&
      (json_object_set_new(moved, "truncated", json_true()) != 0 ||
       query_rows_json(moved, cut) != 0))
    json_decref(o), o = moved = NULL;
  if (o && (headline_objects(ops, store, json_object_get(moved, "grew"), "group") != 0 ||
            headline_objects(ops, store, json_object_get(moved, "shrank"), "group") != 0))
    json_decref(o), o = NULL;
  if (!o) return *body = query_error_json("the store failed or ran out of memory"), 503;
  *body = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
  json_decref(o);
  if (!*body) return *body = query_error_json("out of memory"), 503;
  return 200;
}
