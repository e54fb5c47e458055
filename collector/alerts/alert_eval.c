/*
 * alert_eval.c - the alerts the rules raise for one app and version (see
 * alert_eval.h): new groups from the store's new_groups, the hang rate of
 * two versions from loop_totals (as versions/compare computes it), the
 * groups' shares from top_rows. Runs on the alert thread.
 */
#include "collector/alerts/alert_eval.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/model/rate_interval.h"

#define NS_PER_HOUR 3.6e12
#define SUMMARY_FRAMES 3 /* a group's innermost frames in a summary */

typedef struct eval_s {
  const store_ops_t *ops;
  store_t *store;
  const char *public_url, *app, *version, *prev; /* prev: NULL until found */
  int64_t scan_ns;                               /* new_group: the batches received since */
  alert_fn fn;
  void *user;
  const store_alert_rule_t *rule;
  /* The alerts raised, handed to fn once the reads are over: a store
     streams its rows under its lock, which fn's claims take. */
  alert_t *raised;
  size_t n_raised, cap_raised;
  bool failed;
} eval_t;

/* ---- text ------------------------------------------------------------------- */

/* s with every byte but the unreserved ones percent-encoded, appended. */
static void url_escape(char *out, size_t size, size_t *len, const char *s) {
  static const char HEX[] = "0123456789ABCDEF";
  for (; *s && *len + 4 < size; s++) {
    unsigned char c = (unsigned char)*s;
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '.' || c == '_' || c == '~') {
      out[(*len)++] = (char)c;
    } else {
      out[(*len)++] = '%';
      out[(*len)++] = HEX[c >> 4];
      out[(*len)++] = HEX[c & 15];
    }
  }
  out[*len] = '\0';
}

/* The dashboard's view: public_url's page with the query of names[i] =
   values[i] (NULL values left out), malloc'ed; "" without a public URL. */
static char *view_link(const char *public_url, const char *const *names, const char *const *values,
                       size_t n) {
  if (!public_url || !*public_url) return strdup("");
  size_t size = strlen(public_url) + 16;
  for (size_t i = 0; i < n; i++)
    size += strlen(names[i]) + 2 + (values[i] ? 3 * strlen(values[i]) : 0);
  char *out = malloc(size);
  if (!out) return NULL;
  size_t len = (size_t)snprintf(out, size, "%s", public_url);
  while (len && out[len - 1] == '/')
    out[--len] = '\0';
  len += (size_t)snprintf(out + len, size - len, "/");
  char sep = '?';
  for (size_t i = 0; i < n; i++) {
    if (!values[i]) continue;
    len += (size_t)snprintf(out + len, size - len, "%c%s=", sep, names[i]);
    url_escape(out, size, &len, values[i]);
    sep = '&';
  }
  return out;
}

/* A group's innermost frames, "a <- b <- c" (malloc'ed). */
static char *frames_text(const char *names_json) {
  json_t *names = json_loads(names_json ? names_json : "[]", 0, NULL);
  char text[512] = "";
  size_t len = 0;
  for (size_t i = 0; i < json_array_size(names) && i < SUMMARY_FRAMES; i++) {
    const char *name = json_string_value(json_array_get(names, i));
    if (!name) name = "?";
    int n = snprintf(text + len, sizeof text - len, "%s%s", i ? " <- " : "", name);
    if (n < 0 || (size_t)n >= sizeof text - len) break;
    len += (size_t)n;
  }
  json_decref(names);
  return strdup(len ? text : "(no frames)");
}

/* One alert kept for the caller: it takes link and details. */
static void raise_alert(eval_t *e, const char *key, const char *summary, char *link,
                        json_t *details) {
  char *k = strdup(key), *text = strdup(summary);
  if (e->n_raised == e->cap_raised) {
    size_t cap = e->cap_raised ? 2 * e->cap_raised : 8;
    alert_t *grown = realloc(e->raised, cap * sizeof *grown);
    if (grown) e->raised = grown, e->cap_raised = cap;
  }
  if (!link || !details || !k || !text || e->n_raised == e->cap_raised) {
    e->failed = true;
    free(link), free(k), free(text);
    json_decref(details);
    return;
  }
  e->raised[e->n_raised++] = (alert_t){e->rule, e->app, k, text, link, details};
}

/* The alerts raised to fn, in their order, and freed. */
static void hand_out(eval_t *e) {
  for (size_t i = 0; i < e->n_raised; i++) {
    alert_t *a = &e->raised[i];
    e->fn(a, e->user);
    free((char *)a->key), free((char *)a->summary), free((char *)a->link);
    json_decref(a->details);
  }
  free(e->raised);
}

static bool app_matches(const store_alert_rule_t *r, const char *app) {
  return !r->app || strcmp(r->app, app) == 0;
}

static bool kind_matches(const store_alert_rule_t *r, const char *kind) {
  return !r->event_kind || strcmp(r->event_kind, kind) == 0;
}

/* ---- new_group ----------------------------------------------------------------- */

static int on_new_group(const store_new_group_t *g, void *user) {
  eval_t *e = user;
  if (!kind_matches(e->rule, g->kind)) return 0;
  char key[64 + STORE_SIG_CHARS], summary[768];
  snprintf(key, sizeof key, "new_group:%s:%s", g->kind, g->group_sig);
  char *frames = frames_text(g->names_json);
  snprintf(summary, sizeof summary, "New %s group in %s: %s", g->kind, e->app,
           frames ? frames : "?");
  free(frames);
  const char *names[] = {"app", "kind", "range", "group"};
  const char *values[] = {e->app, g->kind, "all", g->group_sig};
  json_t *names_json = json_loads(g->names_json ? g->names_json : "[]", 0, NULL);
  json_t *details = json_pack("{s:s,s:s,s:o,s:I}", "group", g->group_sig, "kind", g->kind, "frames",
                              names_json ? names_json : json_array(), "first_seen_ns",
                              (json_int_t)g->first_seen_ns);
  raise_alert(e, key, summary, view_link(e->public_url, names, values, 4), details);
  return 0;
}

static int eval_new_groups(eval_t *e) {
  int64_t scan = e->scan_ns;
  if (scan < e->rule->created_ns) scan = e->rule->created_ns;
  return e->ops->new_groups(e->store, e->app, e->rule->created_ns, scan, on_new_group, e);
}

/* ---- the previous version -------------------------------------------------------- */

typedef struct versions_s {
  const char *version;
  char *prev, *last; /* the version before `version`, once it was seen */
  bool found;
} versions_t;

static int on_version(const char *version, int64_t first_ns, void *user) {
  (void)first_ns;
  versions_t *v = user;
  if (strcmp(version, v->version) == 0) {
    v->found = true;
    v->prev = v->last, v->last = NULL;
    return 1; /* stopped: the rest are later */
  }
  free(v->last);
  v->last = strdup(version);
  return 0;
}

/* The version whose first batch came before e->version's first: NULL when
   it is the first (or unknown); -1 when the read failed. */
static int find_prev(eval_t *e, char **prev) {
  versions_t v = {e->version, NULL, NULL, false};
  int rc = e->ops->app_versions(e->store, e->app, on_version, &v);
  free(v.last);
  *prev = v.found ? v.prev : (free(v.prev), NULL);
  return rc == STORE_OK || v.found ? 0 : -1;
}

static void version_query(store_top_query_t *q, const char *app, const char *version,
                          const char *kind) {
  memset(q, 0, sizeof *q);
  q->kind = kind;
  q->app = app;
  q->version = version;
  q->from_ns = 0;
  q->to_ns = INT64_MAX;
}

/* ---- hang_rate_regression --------------------------------------------------------- */

/* A version's rate and its interval per watched hour: false without enough data. */
static bool rate_of(const store_loop_totals_t *t, double *rate, double *low, double *high) {
  double hours = (double)t->sum.watched_ns / NS_PER_HOUR;
  if (!rate_enough_data(t->hangs, hours)) return false;
  rate_poisson_interval(t->hangs, low, high);
  *rate = (double)t->hangs / hours, *low /= hours, *high /= hours;
  return true;
}

static json_t *side_json(const char *version, const store_loop_totals_t *t, double rate, double low,
                         double high) {
  return json_pack("{s:s,s:I,s:f,s:f,s:f,s:f}", "version", version, "hangs", (json_int_t)t->hangs,
                   "watched_hours", (double)t->sum.watched_ns / NS_PER_HOUR, "hangs_per_hour", rate,
                   "hangs_per_hour_low", low, "hangs_per_hour_high", high);
}

static int eval_hang_rate(eval_t *e) {
  store_top_query_t q;
  store_loop_totals_t t[2];
  const char *versions[2] = {e->prev, e->version};
  for (int i = 0; i < 2; i++) {
    version_query(&q, e->app, versions[i], NULL);
    if (e->ops->loop_totals(e->store, &q, &t[i]) != STORE_OK) return STORE_ERROR;
  }
  double rate[2], low[2], high[2];
  if (!rate_of(&t[0], &rate[0], &low[0], &high[0]) || !rate_of(&t[1], &rate[1], &low[1], &high[1]))
    return STORE_OK;
  if (rate_compare(low[0], high[0], low[1], high[1]) <= 0) return STORE_OK;
  char key[1024], summary[1024];
  snprintf(key, sizeof key, "hang_rate_regression:%s:%s", e->prev, e->version);
  snprintf(summary, sizeof summary,
           "Hang rate regression in %s %s: %.2f hangs per hour (95%% %.2f to %.2f) against %s's "
           "%.2f (%.2f to %.2f)",
           e->app, e->version, rate[1], low[1], high[1], e->prev, rate[0], low[0], high[0]);
  const char *names[] = {"app", "a", "b", "range"};
  const char *values[] = {e->app, e->prev, e->version, "all"};
  json_t *details = json_pack("{s:o,s:o}", "a", side_json(e->prev, &t[0], rate[0], low[0], high[0]),
                              "b", side_json(e->version, &t[1], rate[1], low[1], high[1]));
  raise_alert(e, key, summary, view_link(e->public_url, names, values, 4), details);
  return STORE_OK;
}

/* ---- share_regression ------------------------------------------------------------- */

typedef struct shares_s {
  json_t *by_sig; /* signature -> [count a, count b, names_json] */
  int side;
  bool cpu;
  uint64_t total[2];
  bool failed;
} shares_t;

static int on_share_row(const store_top_row_t *row, void *user) {
  shares_t *s = user;
  uint64_t n = s->cpu ? row->samples : row->events;
  json_t *entry = json_object_get(s->by_sig, row->group_sig);
  if (!entry) {
    entry =
        json_pack("[IIs]", (json_int_t)0, (json_int_t)0, row->names_json ? row->names_json : "[]");
    if (!entry || json_object_set_new(s->by_sig, row->group_sig, entry) != 0)
      return s->failed = true, 1;
  }
  json_t *count = json_array_get(entry, (size_t)s->side);
  json_integer_set(count, json_integer_value(count) + (json_int_t)n);
  s->total[s->side] += n;
  return 0;
}

static void share_alert(eval_t *e, const char *kind, const char *sig, json_t *entry,
                        const uint64_t total[2]) {
  uint64_t k[2] = {(uint64_t)json_integer_value(json_array_get(entry, 0)),
                   (uint64_t)json_integer_value(json_array_get(entry, 1))};
  double low[2], high[2];
  for (int i = 0; i < 2; i++)
    rate_binomial_interval(k[i], total[i], &low[i], &high[i]);
  if (rate_compare(low[0], high[0], low[1], high[1]) <= 0) return;
  const char *unit = strcmp(kind, "cpu") == 0 ? "CPU samples" : "hangs";
  char key[1024], summary[1536];
  snprintf(key, sizeof key, "share_regression:%s:%s:%s:%s", kind, sig, e->prev, e->version);
  char *frames = frames_text(json_string_value(json_array_get(entry, 2)));
  snprintf(summary, sizeof summary,
           "Share regression in %s %s: %s went from %.1f%% of %s (%llu of %llu) in %s to %.1f%% "
           "(%llu of %llu)",
           e->app, e->version, frames ? frames : "?", 100.0 * (double)k[0] / (double)total[0], unit,
           (unsigned long long)k[0], (unsigned long long)total[0], e->prev,
           100.0 * (double)k[1] / (double)total[1], (unsigned long long)k[1],
           (unsigned long long)total[1]);
  free(frames);
  const char *names[] = {"app", "kind", "a", "b", "range", "group"};
  const char *values[] = {e->app, kind, e->prev, e->version, "all", sig};
  json_t *details = json_pack(
      "{s:s,s:s,s:{s:s,s:I,s:I,s:f,s:f},s:{s:s,s:I,s:I,s:f,s:f}}", "group", sig, "kind", kind, "a",
      "version", e->prev, "count", (json_int_t)k[0], "total", (json_int_t)total[0], "share_low",
      low[0], "share_high", high[0], "b", "version", e->version, "count", (json_int_t)k[1], "total",
      (json_int_t)total[1], "share_low", low[1], "share_high", high[1]);
  raise_alert(e, key, summary, view_link(e->public_url, names, values, 6), details);
}

static int eval_shares_of(eval_t *e, const char *kind) {
  shares_t s = {json_object(), 0, strcmp(kind, "cpu") == 0, {0, 0}, false};
  const char *versions[2] = {e->prev, e->version};
  int rc = s.by_sig ? STORE_OK : STORE_ERROR;
  store_top_query_t q;
  for (int i = 0; rc == STORE_OK && i < 2; i++) {
    s.side = i;
    version_query(&q, e->app, versions[i], kind);
    rc = e->ops->top_rows(e->store, &q, on_share_row, &s);
  }
  if (rc == STORE_OK && s.failed) rc = STORE_ERROR;
  if (rc == STORE_OK && s.total[0] >= RATE_MIN_COUNT && s.total[1] >= RATE_MIN_COUNT) {
    const char *sig;
    json_t *entry;
    json_object_foreach(s.by_sig, sig, entry) share_alert(e, kind, sig, entry, s.total);
  }
  json_decref(s.by_sig);
  return rc;
}

static int eval_shares(eval_t *e) {
  int rc = STORE_OK;
  if (kind_matches(e->rule, "hang")) rc = eval_shares_of(e, "hang");
  if (rc == STORE_OK && kind_matches(e->rule, "cpu")) rc = eval_shares_of(e, "cpu");
  return rc;
}

/* ---- all rules --------------------------------------------------------------------- */

int alert_evaluate(const store_ops_t *ops, store_t *store, const char *public_url,
                   const store_alert_rule_t *rules, size_t n, const char *app, const char *version,
                   int64_t scan_ns, alert_fn fn, void *user) {
  if (!app || !*app) return STORE_OK;
  eval_t e = {.ops = ops,
              .store = store,
              .public_url = public_url,
              .app = app,
              .version = version && *version ? version : NULL,
              .scan_ns = scan_ns,
              .fn = fn,
              .user = user};
  char *prev = NULL;
  bool prev_read = false;
  int rc = STORE_OK;
  for (size_t i = 0; rc == STORE_OK && i < n; i++) {
    e.rule = &rules[i];
    if (!app_matches(e.rule, app)) continue;
    if (strcmp(e.rule->kind, "new_group") == 0) {
      rc = eval_new_groups(&e);
      continue;
    }
    if (!e.version) continue;
    if (!prev_read && find_prev(&e, &prev) != 0) rc = STORE_ERROR;
    prev_read = true;
    e.prev = prev;
    if (rc != STORE_OK || !prev) continue;
    if (strcmp(e.rule->kind, "hang_rate_regression") == 0) rc = eval_hang_rate(&e);
    if (strcmp(e.rule->kind, "share_regression") == 0) rc = eval_shares(&e);
  }
  free(prev);
  hand_out(&e);
  return rc == STORE_OK && e.failed ? STORE_ERROR : rc;
}
