/*
 * read_request.c - a read of the store run on a read thread (see
 * read_request.h).
 */
#include "collector/http/read_request.h"

#include <stdlib.h>
#include <string.h>

#include "collector/api/params.h"
#include "collector/model/metrics.h"

#define JSON_TYPE "application/json"
#define METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

static enum MHD_Result copy_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value);
static const char *nth_arg(void *ctx, const char *name, size_t nth);
static void answer_text(read_request_t *r, unsigned status, char *text, const char *type);

read_request_t *read_request_new(struct MHD_Connection *conn, const api_route_t *route,
                                 const char *item) {
  read_request_t *r = calloc(1, sizeof *r);
  if (!r) return NULL;
  r->route = route;
  int n = MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, NULL, NULL);
  r->cap_args = n > 0 ? (size_t)n : 1;
  r->args = calloc(r->cap_args, sizeof *r->args);
  r->item = item ? strdup(item) : NULL;
  bool ok = r->args && (!item || r->item);
  if (ok) {
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, copy_arg, r);
    for (size_t i = 0; ok && i < r->n_args; i++)
      ok = r->args[i].name != NULL;
  }
  if (!ok) {
    read_request_free(r);
    return NULL;
  }
  return r;
}

unsigned read_request_check_text(const read_request_t *r, char **body) {
  *body = NULL;
  for (size_t i = 0; i < r->n_args; i++) {
    unsigned status = query_check_text(r->args[i].name, r->args[i].value, body);
    if (status) return status;
  }
  return 0;
}

void read_request_run(read_request_t *r, const store_ops_t *ops, store_t *store, bool cancelled) {
  if (cancelled) {
    read_request_refuse(r, "collector stopping");
    return;
  }
  if (!r->route) { /* /metrics */
    store_stats_t st;
    if (ops->stats(store, &st) != STORE_OK) memset(&st, 0, sizeof st);
    answer_text(r, 200, metrics_render(&st), METRICS_TYPE);
    return;
  }
  const api_route_t *route = r->route;
  char *text = NULL;
  if (route->bytes) {
    r->status = route->bytes(ops, store, nth_arg, r, &r->body, &r->len);
  } else {
    r->status = route->text ? route->text(ops, store, nth_arg, r, &text)
                            : route->item(ops, store, r->item, &text);
    r->body = (uint8_t *)text;
    r->len = text ? strlen(text) : 0;
  }
  r->type = r->status == 200 ? route->type : JSON_TYPE;
  r->disposition = r->status == 200 ? route->disposition : NULL;
}

void read_request_refuse(read_request_t *r, const char *text) {
  answer_text(r, 503, query_error_json(text), JSON_TYPE);
}

void read_request_free(read_request_t *r) {
  if (!r) return;
  for (size_t i = 0; r->args && i < r->n_args; i++) {
    free(r->args[i].name);
    free(r->args[i].value);
  }
  free(r->args);
  free(r->item);
  free(r->body);
  free(r);
}

/* MHD's iterator over the query: each argument copied (a failed copy
   leaves its name NULL, which read_request_new refuses). */
static enum MHD_Result copy_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                const char *value) {
  (void)kind;
  read_request_t *r = cls;
  if (r->n_args == r->cap_args) return MHD_NO;
  read_arg_t *a = &r->args[r->n_args++];
  a->name = strdup(key);
  a->value = value ? strdup(value) : NULL;
  if (value && !a->value) {
    free(a->name);
    a->name = NULL;
  }
  return MHD_YES;
}

/* query_arg_fn over the copy: the nth value of name, in the URL's order
   ("?name" without "=" is "", as "?name=" is). */
static const char *nth_arg(void *ctx, const char *name, size_t nth) {
  const read_request_t *r = ctx;
  for (size_t i = 0; i < r->n_args; i++) {
    if (strcmp(r->args[i].name, name) != 0) continue;
    if (nth-- == 0) return r->args[i].value ? r->args[i].value : "";
  }
  return NULL;
}

/* A text answer (text NULL: out of memory, body NULL). */
static void answer_text(read_request_t *r, unsigned status, char *text, const char *type) {
  free(r->body);
  r->status = status;
  r->body = (uint8_t *)text;
  r->len = text ? strlen(text) : 0;
  r->type = type;
  r->disposition = NULL;
}
