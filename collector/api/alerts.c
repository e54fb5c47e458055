/*
 * alerts.c - GET /api/v1/alerts/deliveries (see alerts.h). Runs on a
 * read thread.
 */
#include "collector/api/alerts.h"

#include <stdlib.h>

#include "sdk/base/clock.h"

json_t *alert_row_json(const store_alert_t *a) {
  char when[40];
  perf__format_iso8601(a->time_ns, when, sizeof when);
  return json_pack("{s:I,s:I,s:s,s:s,s:I,s:I,s:I,s:s,s:s,s:s?}", "id", (json_int_t)a->id, "rule",
                   (json_int_t)a->rule_id, "alert_key", a->alert_key, "state", a->state, "status",
                   (json_int_t)a->status, "attempts", (json_int_t)a->attempts, "time_ns",
                   (json_int_t)a->time_ns, "time", when, "summary", a->summary, "link",
                   a->link && *a->link ? a->link : NULL);
}

/* A rule as a reader sees it: no webhook URL (it may hold a secret). */
static int on_rule(const store_alert_rule_t *r, void *user) {
  json_t *row = json_pack("{s:I,s:s,s:s,s:{s:s?,s:s?}}", "id", (json_int_t)r->id, "kind", r->kind,
                          "format", r->format, "filters", "app", r->app, "kind", r->event_kind);
  return !row || json_array_append_new(user, row) != 0;
}

static int on_alert(const store_alert_t *a, void *user) {
  json_t *row = alert_row_json(a);
  return !row || json_array_append_new(user, row) != 0;
}

unsigned query_alert_deliveries(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                                char **body) {
  *body = NULL;
  long long limit, rule = 0;
  unsigned bad = query_limit(arg, ctx, &limit, body);
  if (bad) return bad;
  const char *text = arg(ctx, "rule", 0);
  if (text && !query_parse_uint(text, INT64_MAX, &rule))
    return *body = query_error_param("parameter %s: not a rule id", "rule"), 400;
  json_t *list = json_array(), *rules = json_array();
  if (!list || !rules || ops->alert_rows(store, rule, limit, on_alert, list) != STORE_OK ||
      ops->alert_rules(store, on_rule, rules) != STORE_OK) {
    json_decref(list);
    json_decref(rules);
    return *body = query_error_json("the store failed or ran out of memory"), 503;
  }
  json_t *o = json_pack("{s:o,s:o}", "deliveries", list, "rules", rules);
  *body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (!*body) return *body = query_error_json("out of memory"), 503;
  return 200;
}
