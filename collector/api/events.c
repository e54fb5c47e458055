/*
 * events.c - the events list, an event's detail and the time series (see
 * events.h), written with jansson.
 */
#include "collector/api/events.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/api/frames.h"
#include "collector/api/query_states.h"
#include "collector/model/rollup.h"

/* ---- events ------------------------------------------------------------------ */

/* An event with its batch's tags ([{"key","value"}], as the store has them). */
static json_t *event_json(const store_event_row_t *e) {
  json_t *tags = e->tags_json ? json_loads(e->tags_json, 0, NULL) : json_array();
  if (!json_is_array(tags)) {
    json_decref(tags);
    return NULL;
  }
  return json_pack("{s:I, s:s?, s:I, s:f, s:I, s:i, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:o}",
                   "id", (json_int_t)e->id, "kind", e->kind, "start_ms",
                   (json_int_t)(e->start_ns / 1000000), "duration_ms", query_ms(e->duration_ns),
                   "tid", (json_int_t)e->tid, "cpu_percent", (int)e->cpu_percent, "reason",
                   e->reason, "label", e->label, "loop", e->loop, "app", e->app, "version",
                   e->version, "environment", e->environment, "group", e->group_sig, "tags", tags);
}

typedef struct event_list_s {
  json_t *events;
  size_t json; /* the compact JSON of the events so far */
  bool truncated;
} event_list_t;

static int on_event_row(const store_event_row_t *row, void *user) {
  event_list_t *l = user;
  json_t *e = event_json(row);
  size_t len = e ? json_dumpb(e, NULL, 0, JSON_COMPACT) : 0;
  if (l->json && len > QUERY_MAX_EVENTS_JSON - l->json) {
    json_decref(e);
    l->truncated = true;
    return 1; /* stops the scan: the answer is full */
  }
  l->json += len + 1;
  return json_array_append_new(l->events, e) != 0;
}

unsigned query_events(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                      char **body) {
  *body = NULL;
  store_top_query_t q;
  long long limit;
  unsigned bad = query_event_filters(arg, ctx, &q, body);
  if (!bad) bad = query_limit(arg, ctx, &limit, body);
  if (bad) return bad;
  event_list_t l = {json_array(), 0, false};
  int rc = l.events ? ops->event_rows(store, &q, limit, on_event_row, &l) : STORE_ERROR;
  if (rc != STORE_OK && !l.truncated) {
    json_decref(l.events);
    return *body = query_error_param("%s", "the store failed or ran out of memory"), 503;
  }
  json_t *o = json_pack("{s:o, s:b}", "events", l.events, "truncated", l.truncated);
  *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!*body) return *body = query_error_param("%s", "out of memory"), 503;
  return 200;
}

/* ---- time series ------------------------------------------------------------- */

static const struct {
  const char *name;
  int64_t ms;
} BUCKETS[] = {{"minute", 60000}, {"hour", 3600000}, {"day", 86400000}};

typedef struct series_s {
  json_t *points;
  size_t n;
  query_rows_t rows; /* the events summed (every bucket's), and the store's limit */
} series_t;

static int on_bucket(const store_bucket_row_t *row, void *user) {
  series_t *s = user;
  s->n++;
  query_rows_seen(&s->rows, s->rows.read + row->events, row->rows_limit);
  if (s->n > QUERY_MAX_POINTS) return 0; /* only counted: the answer is a 400 */
  return json_array_append_new(s->points, json_pack("{s:I, s:I, s:f}", "start_ms",
                                                    (json_int_t)(row->start_ns / 1000000), "events",
                                                    (json_int_t)row->events, "event_total_ms",
                                                    row->total_ns / 1e6)) != 0;
}

static char *too_many_points(const char *why) {
  char text[200];
  _Static_assert(QUERY_MAX_POINTS == 1000, "the message says 1000");
  snprintf(text, sizeof text,
           "parameter bucket: %s would need more than 1000 points; use a larger bucket or a"
           " shorter from..to",
           why);
  return query_error_param("%s", text);
}

unsigned query_timeseries(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body) {
  *body = NULL;
  store_top_query_t q;
  unsigned bad = query_series_filters(arg, ctx, &q, body);
  if (bad) return bad;
  if (q.group)
    return *body = query_error_param("parameter %s: not a filter of timeseries", "group"), 400;
  const char *name = arg(ctx, "bucket", 0);
  int64_t bucket_ns = 0;
  for (size_t i = 0; name && i < sizeof BUCKETS / sizeof BUCKETS[0]; i++)
    if (strcmp(name, BUCKETS[i].name) == 0) bucket_ns = BUCKETS[i].ms * 1000000;
  if (!bucket_ns)
    return *body = query_error_param("parameter %s: must be minute, hour or day", "bucket"), 400;
  /* A range given whole is judged by its length alone, whatever it holds. */
  if (arg(ctx, "from", 0) && arg(ctx, "to", 0) &&
      q.to_ns / bucket_ns - q.from_ns / bucket_ns >= QUERY_MAX_POINTS)
    return *body = too_many_points("from..to"), 400;
  series_t s = {json_array(), 0, {0, 0}};
  int rc = s.points ? ops->time_buckets(store, &q, bucket_ns, QUERY_MAX_POINTS + 1, on_bucket, &s)
                    : STORE_ERROR;
  if (rc != STORE_OK) {
    json_decref(s.points);
    return *body = query_error_param("%s", "the store failed or ran out of memory"), 503;
  }
  if (s.n > QUERY_MAX_POINTS) {
    json_decref(s.points);
    return *body = too_many_points("the matching events"), 400;
  }
  json_t *o =
      json_pack("{s:I, s:o}", "bucket_ms", (json_int_t)(bucket_ns / 1000000), "points", s.points);
  if (o && query_rows_cut(&s.rows) &&
      (json_object_set_new(o, "truncated", json_true()) != 0 || query_rows_json(o, &s.rows) != 0))
    json_decref(o), o = NULL;
  *body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (!*body) return *body = query_error_param("%s", "out of memory"), 503;
  return 200;
}

typedef struct detail_s {
  json_t *event, *threads, *stacks;
  size_t text; /* stored frames added so far, capped at QUERY_MAX_DETAIL_TEXT */
  bool truncated;
  bool hang;           /* a hang or fatal hang: its stacks get their hang time */
  int64_t duration_ns; /* the event's */
  uint64_t samples;    /* its stacks' samples summed */
} detail_t;

static int on_detail_event(const store_event_row_t *row, void *user) {
  detail_t *d = user;
  d->hang = row->kind && (!strcmp(row->kind, "hang") || !strcmp(row->kind, "fatal_hang"));
  d->duration_ns = row->duration_ns;
  return !(d->event = event_json(row));
}

/* A hang's stacks: each its share of the hang's duration by samples
   (hang_ms, as the flame graph adds them up). */
static bool add_hang_times(detail_t *d) {
  size_t i;
  json_t *stack;
  json_array_foreach(d->stacks, i, stack) {
    uint64_t n = (uint64_t)json_integer_value(json_object_get(stack, "samples"));
    int64_t ns = rollup_wall_share(d->duration_ns, n, d->samples);
    if (json_object_set_new(stack, "hang_ms", json_real(query_ms(ns))) != 0) return false;
  }
  return true;
}

/* Past the cap a stack is listed without its frames (names and frames
   empty): the threads and samples stay whole. */
static bool detail_room(detail_t *d, const char *frames_json) {
  size_t len = frames_json ? strlen(frames_json) : 0;
  if (d->truncated || len > QUERY_MAX_DETAIL_TEXT - d->text) return !(d->truncated = true);
  d->text += len;
  return true;
}

static int on_detail_count(const store_count_row_t *row, void *user) {
  detail_t *d = user;
  d->samples += row->samples;
  const char *text = detail_room(d, row->frames_json) ? row->frames_json : NULL;
  json_t *frames = text ? query_frames_shown(text) : json_array();
  json_t *names = text ? query_frame_names(text) : json_array();
  if (!frames || !names) {
    json_decref(frames);
    json_decref(names);
    return 1;
  }
  json_t *stack = json_pack("{s:s, s:I, s:I, s:o, s:o}", "signature", row->stack_sig, "tid",
                            (json_int_t)row->tid, "samples", (json_int_t)row->samples, "names",
                            names, "frames", frames);
  /* A CPU profile's stack: the CPU time its samples stand for. */
  if (stack && row->cpu_us >= 0 &&
      json_object_set_new(stack, "cpu_us", json_integer((json_int_t)row->cpu_us)) != 0) {
    json_decref(stack);
    return 1;
  }
  if (json_array_append_new(d->stacks, stack) != 0) return 1;
  size_t i;
  json_t *t;
  json_array_foreach(d->threads, i,
                     t) if (json_integer_value(json_object_get(t, "tid")) == (json_int_t)row->tid) {
    json_int_t n = json_integer_value(json_object_get(t, "samples")) + (json_int_t)row->samples;
    return json_object_set_new(t, "samples", json_integer(n)) != 0;
  }
  return json_array_append_new(d->threads, json_pack("{s:I, s:I}", "tid", (json_int_t)row->tid,
                                                     "samples", (json_int_t)row->samples)) != 0;
}

static int cmp_thread(const void *x, const void *y) {
  json_int_t a = json_integer_value(json_object_get(*(json_t *const *)x, "samples"));
  json_int_t b = json_integer_value(json_object_get(*(json_t *const *)y, "samples"));
  return (a < b) - (a > b);
}

unsigned query_event(const store_ops_t *ops, store_t *store, const char *id_text, char **body) {
  *body = NULL;
  long long id;
  if (!query_parse_uint(id_text, INT64_MAX, &id) || id < 1)
    return *body = query_error_param("no event %s", "with that id"), 404;
  detail_t d = {.threads = json_array(), .stacks = json_array()};
  int rc = d.threads && d.stacks
               ? ops->event_detail(store, id, on_detail_event, on_detail_count, &d)
               : STORE_ERROR;
  unsigned status = 200;
  if (rc == STORE_NOT_FOUND) {
    status = 404;
    *body = query_error_param("no event %s", "with that id");
  } else if (rc != STORE_OK || !d.event) {
    status = 503;
    *body = query_error_param("%s", "the store failed or ran out of memory");
  } else {
    /* threads by samples, largest first */
    size_t n = json_array_size(d.threads);
    json_t **v = n ? calloc(n, sizeof *v) : NULL;
    if (v) {
      for (size_t i = 0; i < n; i++)
        v[i] = json_incref(json_array_get(d.threads, i));
      qsort(v, n, sizeof *v, cmp_thread);
      json_array_clear(d.threads);
      for (size_t i = 0; i < n; i++)
        json_array_append_new(d.threads, v[i]);
      free(v);
    }
    json_t *states = d.hang && !add_hang_times(&d) ? NULL : query_event_states(ops, store, id);
    if (!states || json_object_set_new(d.event, "states", states) != 0 ||
        json_object_set(d.event, "threads", d.threads) != 0 ||
        json_object_set(d.event, "stacks", d.stacks) != 0 ||
        json_object_set_new(d.event, "truncated", json_boolean(d.truncated)) != 0 ||
        !(*body = json_dumps(d.event, JSON_COMPACT))) {
      status = 503;
      *body = query_error_param("%s", "out of memory");
    }
  }
  json_decref(d.event);
  json_decref(d.threads);
  json_decref(d.stacks);
  return status;
}
