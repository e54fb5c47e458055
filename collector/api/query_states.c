/*
 * query_states.c - thread states as JSON (see query_states.h).
 */
#include "collector/api/query_states.h"

#include <stdlib.h>

static json_t *state_json(const store_state_count_t *row, bool with_tid) {
  json_t *o = json_pack("{s:s, s:s, s:s, s:I}", "state", row->state ? row->state : "unknown",
                        "syscall", row->syscall ? row->syscall : "", "fd", row->fd ? row->fd : "",
                        "samples", (json_int_t)row->samples);
  if (o && with_tid && json_object_set_new(o, "tid", json_integer(row->tid)) != 0) {
    json_decref(o);
    return NULL;
  }
  return o;
}

static int on_event_state(const store_state_count_t *row, void *user) {
  return json_array_append_new(user, state_json(row, true)) != 0;
}

json_t *query_event_states(const store_ops_t *ops, store_t *store, int64_t id) {
  json_t *a = json_array();
  if (a && ops->event_states(store, id, on_event_state, a) == STORE_OK) return a;
  json_decref(a);
  return NULL;
}

typedef struct sum_s {
  json_t *states;
  uint64_t total;
  query_rows_t rows; /* the event_states rows summed, and the store's limit */
} sum_t;

static int on_state_row(const store_state_sum_t *row, void *user) {
  sum_t *s = user;
  s->total += row->count.samples;
  query_rows_seen(&s->rows, s->rows.read + row->rows, row->rows_limit);
  return json_array_append_new(s->states, state_json(&row->count, false)) != 0;
}

unsigned query_states(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                      char **body) {
  *body = NULL;
  store_top_query_t q;
  unsigned bad = query_stack_filters(arg, ctx, &q, body);
  if (bad) return bad;
  sum_t s = {json_array(), 0, {0, 0}};
  if (!s.states || ops->state_rows(store, &q, on_state_row, &s) != STORE_OK) {
    json_decref(s.states);
    return *body = query_error_json("the store failed or ran out of memory"), 503;
  }
  size_t i;
  json_t *o;
  json_array_foreach(s.states, i, o) {
    double share = (double)json_integer_value(json_object_get(o, "samples")) / (double)s.total;
    json_object_set_new(o, "share", json_real(share));
  }
  json_t *out = json_pack("{s:I, s:o}", "samples", (json_int_t)s.total, "states", s.states);
  if (out && query_rows_cut(&s.rows) &&
      (json_object_set_new(out, "truncated", json_true()) != 0 ||
       query_rows_json(out, &s.rows) != 0))
    json_decref(out), out = NULL;
  *body = out ? json_dumps(out, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6)) : NULL;
  json_decref(out);
  if (!*body) return *body = query_error_json("out of memory"), 503;
  return 200;
}
