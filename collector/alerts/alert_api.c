/*
 * alert_api.c - the alert rules' routes (see alert_api.h): a rule's JSON
 * checked field by field, its webhook's host against --alert-allow, the
 * rows of the store as JSON. Runs on the HTTP worker of the request.
 */
#include "collector/alerts/alert_api.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "collector/api/params.h"
#include "sdk/base/clock.h"

static const char *const KINDS[] = {"new_group", "hang_rate_regression", "share_regression"};
static const char *const FORMATS[] = {"json", "slack"};
static const char *const EVENT_KINDS[] = {"hang", "cpu"};

/* {"error": "field <name>: <why>"} */
static unsigned bad_field(char **body, const char *name, const char *why) {
  char text[400];
  snprintf(text, sizeof text, "field %s: %s", name, why);
  *body = query_error_json(text);
  return 400;
}

static bool one_of(const char *v, const char *const *set, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (strcmp(v, set[i]) == 0) return true;
  return false;
}

/* A string field of o: NULL when absent or null; 400 when another type,
   empty or over max bytes. */
static unsigned string_field(json_t *o, const char *key, const char *name, size_t max,
                             const char **out, char **body) {
  json_t *v = json_object_get(o, key);
  *out = NULL;
  if (!v || json_is_null(v)) return 0;
  if (!json_is_string(v)) return bad_field(body, name, "not a string");
  if (!json_string_length(v)) return bad_field(body, name, "empty");
  if (json_string_length(v) > max || strlen(json_string_value(v)) != json_string_length(v)) {
    char why[64];
    snprintf(why, sizeof why, "at most %zu bytes, no NUL", max);
    return bad_field(body, name, why);
  }
  *out = json_string_value(v);
  return 0;
}

/* url: http:// or https://, its host one --alert-allow names. */
static unsigned check_url(const alert_config_t *cfg, const char *url, char **body) {
  CURLU *u = curl_url();
  char *scheme = NULL, *host = NULL;
  unsigned bad = 0;
  if (!u || curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK ||
      curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK) {
    bad = bad_field(body, "url", "not an absolute URL");
  } else if (strcasecmp(scheme, "http") != 0 && strcasecmp(scheme, "https") != 0) {
    bad = bad_field(body, "url", "not http:// or https://");
  } else {
    bool allowed = false;
    for (size_t i = 0; i < cfg->n_allow && !allowed; i++)
      allowed = strcasecmp(cfg->allow[i], host) == 0;
    if (!allowed) {
      char why[300];
      snprintf(why, sizeof why, "host '%.200s' is not one --alert-allow names", host);
      bad = bad_field(body, "url", why);
    }
  }
  curl_free(scheme);
  curl_free(host);
  curl_url_cleanup(u);
  return bad;
}

static unsigned check_keys(json_t *o, const char *const *known, size_t n, const char *prefix,
                           char **body) {
  const char *key;
  json_t *v;
  json_object_foreach(o, key, v) {
    if (one_of(key, known, n)) continue;
    char name[300];
    snprintf(name, sizeof name, "%s%.200s", prefix, key);
    return bad_field(body, name, "unknown");
  }
  return 0;
}

static unsigned check_filters(json_t *o, store_alert_rule_t *r, char **body) {
  json_t *f = json_object_get(o, "filters");
  if (!f || json_is_null(f)) return 0;
  if (!json_is_object(f)) return bad_field(body, "filters", "not an object");
  static const char *const KNOWN[] = {"app", "kind"};
  unsigned bad = check_keys(f, KNOWN, 2, "filters.", body);
  if (!bad) bad = string_field(f, "app", "filters.app", ALERT_APP_MAX_BYTES, &r->app, body);
  if (!bad) bad = string_field(f, "kind", "filters.kind", 16, &r->event_kind, body);
  if (bad) return bad;
  if (r->event_kind && !one_of(r->event_kind, EVENT_KINDS, 2))
    return bad_field(body, "filters.kind", "not hang or cpu");
  if (r->event_kind && strcmp(r->kind, "hang_rate_regression") == 0 &&
      strcmp(r->event_kind, "hang") != 0)
    return bad_field(body, "filters.kind", "a hang rate regression is of hangs only");
  return 0;
}

/* The rule of JSON o into *r (pointing into o), or 400 naming the field. */
static unsigned parse_rule(const alert_config_t *cfg, json_t *o, store_alert_rule_t *r,
                           char **body) {
  memset(r, 0, sizeof *r);
  if (!json_is_object(o)) return bad_field(body, "body", "not a JSON object");
  static const char *const KNOWN[] = {"kind", "url", "format", "filters"};
  unsigned bad = check_keys(o, KNOWN, 4, "", body);
  if (!bad) bad = string_field(o, "kind", "kind", 64, &r->kind, body);
  if (!bad && !r->kind) return bad_field(body, "kind", "required");
  if (!bad && !one_of(r->kind, KINDS, 3))
    return bad_field(body, "kind", "not new_group, hang_rate_regression or share_regression");
  if (!bad) bad = string_field(o, "url", "url", ALERT_URL_MAX_BYTES, &r->url, body);
  if (!bad && !r->url) return bad_field(body, "url", "required");
  if (!bad) bad = check_url(cfg, r->url, body);
  if (!bad) bad = string_field(o, "format", "format", 16, &r->format, body);
  if (!bad && !r->format) r->format = "json";
  if (!bad && !one_of(r->format, FORMATS, 2)) return bad_field(body, "format", "not json or slack");
  if (!bad) bad = check_filters(o, r, body);
  return bad;
}

static json_t *rule_json(const store_alert_rule_t *r) {
  return json_pack("{s:I,s:s,s:s,s:s,s:{s:s?,s:s?},s:I}", "id", (json_int_t)r->id, "kind", r->kind,
                   "url", r->url, "format", r->format, "filters", "app", r->app, "kind",
                   r->event_kind, "created_ns", (json_int_t)r->created_ns);
}

static unsigned answer(json_t *o, unsigned status, char **body) {
  *body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (!*body) return *body = query_error_json("out of memory"), 503;
  return status;
}

unsigned alert_rules_post(const store_ops_t *ops, store_t *store, const alert_config_t *cfg,
                          const char *json, size_t len, char **body) {
  *body = NULL;
  json_error_t err;
  json_t *o = json_loadb(json, len, JSON_REJECT_DUPLICATES, &err);
  if (!o) {
    char why[300];
    snprintf(why, sizeof why, "not JSON (%.200s)", err.text);
    return bad_field(body, "body", why);
  }
  store_alert_rule_t r;
  unsigned status = parse_rule(cfg, o, &r, body);
  if (!status) {
    r.created_ns = perf__wall_ns();
    if (ops->alert_rule_add(store, &r, &r.id) != STORE_OK)
      status = 503, *body = query_error_json("the store failed");
    else
      status = answer(rule_json(&r), 201, body);
  }
  json_decref(o);
  return status;
}

static int on_rule(const store_alert_rule_t *r, void *user) {
  json_t *row = rule_json(r);
  return !row || json_array_append_new(user, row) != 0;
}

unsigned alert_rules_get(const store_ops_t *ops, store_t *store, char **body) {
  json_t *list = json_array();
  if (!list || ops->alert_rules(store, on_rule, list) != STORE_OK) {
    json_decref(list);
    return *body = query_error_json("the store failed or ran out of memory"), 503;
  }
  return answer(json_pack("{s:o}", "rules", list), 200, body);
}

unsigned alert_rules_delete(const store_ops_t *ops, store_t *store, const char *item, char **body) {
  *body = NULL;
  long long id;
  if (!query_parse_uint(item, INT64_MAX, &id) || id == 0)
    return *body = query_error_json("not a rule id: /api/v1/alerts/rules/<id>"), 400;
  int rc = ops->alert_rule_delete(store, id);
  if (rc == STORE_NOT_FOUND) return *body = query_error_json("no such rule"), 404;
  if (rc != STORE_OK) return *body = query_error_json("the store failed"), 503;
  return 204;
}
