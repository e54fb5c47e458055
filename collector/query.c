/*
 * query.c - GET /api/v1/top-stacks (see query.h): the store streams one row
 * per (group, version, label, duration bin), from the rollups or raw events
 * (rollup.h), ordered by group; the groups are aggregated here (events,
 * samples, CPU time, the events' durations for the mean, the bins for the
 * 95th percentile, first/last seen, distinct versions, labels), sorted by
 * impact (hang: hang_ms; cpu: cpu_us) and written with jansson. The stack
 * exports (folded, flame) and an event's detail follow.
 */
#include "query.h"

#include "query_states.h"

#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame_json.h"
#include "headline.h"
#include "rollup.h"
#include "signature.h"

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
  bool failed;
} agg_t;

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

static double ms(int64_t ns) {
  return (double)ns / 1e6;
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
      cpu ? json_integer((json_int_t)g->cpu_us) : json_real(ms(g->total_ns)), "event_total_ms",
      ms(g->total_ns), "event_mean_ms", ms(g->total_ns) / (double)g->events, "event_p95_ms",
      ms(rollup_hist_p95(&g->hist, g->max_ns)), "first_seen", (json_int_t)(g->first_ns / 1000000),
      "last_seen", (json_int_t)(g->last_ns / 1000000), "versions", versions_json(g), "labels",
      labels_json(g));
  return o;
}

/* ---- parameters ------------------------------------------------------------ */

static char *error_body(const char *fmt, const char *param) {
  char text[200]; /* as long as too_many_points' text: -O3 checks the bound */
  snprintf(text, sizeof text, fmt, param);
  json_t *o = json_pack("{s:s}", "error", text);
  char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return body;
}

/* A decimal integer in 0..max (digits only: no sign, no spaces, no hex),
   read in 64 bits with strtoll's errno; false when it is not one. */
static bool parse_uint(const char *text, long long max, long long *out) {
  if (!text || !*text) return false;
  for (const char *p = text; *p; p++)
    if (*p < '0' || *p > '9') return false;
  char *end;
  errno = 0;
  long long v = strtoll(text, &end, 10);
  if (errno == ERANGE || *end || v < 0 || v > max) return false;
  *out = v;
  return true;
}

static const char *filter(query_arg_fn arg, void *ctx, const char *name) {
  const char *v = arg(ctx, name, 0);
  return v && *v ? v : NULL;
}

/* tag=key:value, repeatable (all required), split at the first colon:
   the key not empty, the value may be; an empty tag= means nothing. */
static unsigned parse_tags(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body) {
  const char *text;
  for (size_t nth = 0; (text = arg(ctx, "tag", nth)) != NULL; nth++) {
    if (!*text) continue;
    const char *colon = strchr(text, ':');
    if (!colon) return *body = error_body("parameter %s: must be key:value", "tag"), 400;
    if (colon == text)
      return *body = error_body("parameter %s: the key before the colon is empty", "tag"), 400;
    _Static_assert(STORE_MAX_TAG_FILTERS == 4, "the message says 4");
    if (q->n_tags == STORE_MAX_TAG_FILTERS)
      return *body = error_body("parameter %s: at most 4 tags at once", "tag"), 400;
    q->tags[q->n_tags++] = (store_tag_t){text, colon + 1, (size_t)(colon - text)};
  }
  return 0;
}

/* from/to are unix milliseconds whose nanoseconds fit int64 (up to about
   the year 2262). The last millisecond that fits does not fit whole: its
   end is clamped to INT64_MAX rather than overflowing. */
#define MAX_MS (INT64_MAX / 1000000)

static int64_t end_of_ms(long long ms) {
  int64_t start = (int64_t)ms * 1000000;
  return start > INT64_MAX - 999999 ? INT64_MAX : start + 999999;
}

/* kind (required: hang|cpu; optional: also absent or empty), app, version,
   environment, host, tag, from, to into q; 0, or 400 with *body the error. */
static unsigned parse_filters(query_arg_fn arg, void *ctx, bool kind_required, store_top_query_t *q,
                              char **body) {
  *q = (store_top_query_t){.from_ns = 0, .to_ns = INT64_MAX};
  const char *kind = arg(ctx, "kind", 0);
  if (!kind_required && kind && !*kind) kind = NULL;
  if ((kind_required || kind) && (!kind || (strcmp(kind, "hang") != 0 && strcmp(kind, "cpu") != 0)))
    return *body = error_body("parameter %s: must be hang or cpu", "kind"), 400;
  q->kind = kind;
  q->app = filter(arg, ctx, "app");
  q->version = filter(arg, ctx, "version");
  q->environment = filter(arg, ctx, "environment");
  q->host = filter(arg, ctx, "host");
  unsigned bad = parse_tags(arg, ctx, q, body);
  if (bad) return bad;
  q->group = filter(arg, ctx, "group");
  q->label = filter(arg, ctx, "label");
  if (q->group && (strlen(q->group) > STORE_SIG_CHARS ||
                   strspn(q->group, "0123456789abcdef") != strlen(q->group)))
    return *body = error_body("parameter %s: must be a group's signature (lowercase hex)", "group"),
           400;
  long long v;
  const char *from = arg(ctx, "from", 0), *to = arg(ctx, "to", 0);
  if (from) {
    if (!parse_uint(from, MAX_MS, &v))
      return *body =
                 error_body("parameter %s: must be unix milliseconds, 0..9223372036854", "from"),
             400;
    q->from_ns = (int64_t)v * 1000000;
  }
  if (to) {
    if (!parse_uint(to, MAX_MS, &v))
      return *body = error_body("parameter %s: must be unix milliseconds, 0..9223372036854", "to"),
             400;
    q->to_ns = end_of_ms(v); /* the whole millisecond */
  }
  if (q->from_ns > q->to_ns)
    return *body = error_body("parameter %s: must not be before from", "to"), 400;
  return 0;
}

static unsigned parse_limit(query_arg_fn arg, void *ctx, long long *limit, char **body) {
  const char *limit_text = arg(ctx, "limit", 0);
  *limit = QUERY_LIMIT_DEFAULT;
  if (limit_text && (!parse_uint(limit_text, QUERY_LIMIT_MAX, limit) || *limit < 1))
    return *body = error_body("parameter %s: must be 1..1000", "limit"), 400;
  return 0;
}

unsigned query_top_stacks(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body) {
  *body = NULL;
  store_top_query_t q;
  unsigned bad = parse_filters(arg, ctx, true, &q, body);
  if (bad) return bad;
  bool cpu = strcmp(q.kind, "cpu") == 0;
  long long limit;
  if ((bad = parse_limit(arg, ctx, &limit, body))) return bad;

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

/* ---- stack counts: folded export and flame graph ----------------------------- */

/* A shown frame (frame_json.h) to its name: its label. */
static json_t *frame_name(const json_t *frame) {
  char text[FRAME_LABEL_MAX];
  frame_json_label(frame, text);
  return json_string(text);
}

unsigned query_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body) {
  return parse_filters(arg, ctx, false, q, body);
}

unsigned query_stack_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body) {
  *body = NULL;
  return parse_filters(arg, ctx, true, q, body);
}

json_t *query_frame_name(const json_t *frame) {
  return frame_name(frame);
}

char *query_error_json(const char *text) {
  return error_body("%s", text);
}

/* The names of a stored frames array (expanded: inline frames and the
   end marker are frames), innermost first; NULL on failure. */
static json_t *frame_names(const char *frames_json) {
  json_t *frames = json_loads(frames_json, 0, NULL);
  json_t *names = frames ? frame_json_labels(frames) : NULL;
  json_decref(frames);
  return names;
}

/* A stored frames array as shown (frame_json_expand); NULL on failure. */
static json_t *frames_shown(const char *frames_json) {
  json_t *frames = json_loads(frames_json, 0, NULL);
  json_t *shown = frames ? frame_json_expand(frames) : NULL;
  json_decref(frames);
  if (shown && headline_mark_frames(shown) != 0) json_decref(shown), shown = NULL;
  return shown;
}

/* What an export shows of a stack: its samples, CPU time (cpu) and wall
   time (hang: the stack's share of its hangs' durations). */
typedef struct stack_value_s {
  uint64_t samples, cpu_us;
  int64_t wall_ns;
} stack_value_t;

static void value_add(stack_value_t *to, const stack_value_t *v) {
  to->samples += v->samples;
  to->cpu_us += v->cpu_us;
  to->wall_ns += v->wall_ns;
}

typedef struct stack_entry_s {
  json_t *names; /* innermost first */
  stack_value_t value;
} stack_entry_t;

/* The stacks of an export, at most QUERY_MAX_STACK_TEXT bytes of stored
   frames: the store sends the heaviest first, and every stack past the cap
   only adds its values to `truncated`, shown as one stack of a single
   QUERY_TRUNCATED frame, so totals stay exact. */
typedef struct stack_set_s {
  bool cpu; /* kind=cpu (else hang) */
  stack_entry_t *v;
  size_t n, cap;
  size_t text; /* stored frames JSON read so far */
  stack_value_t truncated;
  bool failed;
} stack_set_t;

static int on_stack_row(const store_stack_row_t *row, void *user) {
  stack_set_t *set = user;
  if (row->samples == 0) return 0;
  stack_value_t value = {row->samples, row->cpu_us, row->wall_ns};
  size_t len = strlen(row->frames_json);
  if (set->truncated.samples || len > QUERY_MAX_STACK_TEXT - set->text) {
    value_add(&set->truncated, &value);
    return 0;
  }
  set->text += len;
  json_t *names = frame_names(row->frames_json);
  if (!names) return set->failed = true, 1;
  if (json_array_size(names) == 0) {
    json_decref(names);
    return 0;
  }
  if (set->n == set->cap) {
    size_t cap = set->cap ? 2 * set->cap : 64;
    stack_entry_t *grown = realloc(set->v, cap * sizeof *grown);
    if (!grown) return json_decref(names), set->failed = true, 1;
    set->v = grown;
    set->cap = cap;
  }
  set->v[set->n++] = (stack_entry_t){names, value};
  return 0;
}

static void stack_set_free(stack_set_t *set) {
  for (size_t i = 0; i < set->n; i++)
    json_decref(set->v[i].names);
  free(set->v);
}

/* The samples past the cap as one more stack: [QUERY_TRUNCATED]. */
static bool add_truncated_stack(stack_set_t *set) {
  if (!set->truncated.samples) return true;
  json_t *names = json_pack("[s]", QUERY_TRUNCATED);
  stack_entry_t *grown = names ? realloc(set->v, (set->n + 1) * sizeof *grown) : NULL;
  if (!grown) return json_decref(names), false;
  set->v = grown;
  set->cap = set->n + 1;
  set->v[set->n++] = (stack_entry_t){names, set->truncated};
  return true;
}

/* Parameters, then the stacks of q; 0 when set is filled, else the status
   with *body. */
static unsigned collect_stacks(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                               stack_set_t *set, char **body) {
  *body = NULL;
  memset(set, 0, sizeof *set);
  store_top_query_t q;
  unsigned bad = parse_filters(arg, ctx, true, &q, body);
  if (bad) return bad;
  set->cpu = strcmp(q.kind, "cpu") == 0;
  if (ops->stack_rows(store, &q, on_stack_row, set) != STORE_OK || set->failed ||
      !add_truncated_stack(set)) {
    stack_set_free(set);
    return *body = error_body("%s", "the store failed or ran out of memory"), 503;
  }
  return 0;
}

typedef struct text_s {
  char *p;
  size_t len, cap;
  bool failed;
} text_t;

static void text_add(text_t *t, const char *s, size_t n) {
  if (t->failed) return;
  if (t->len + n + 1 > t->cap) {
    size_t cap = t->cap ? t->cap : 4096;
    while (cap < t->len + n + 1)
      cap *= 2;
    char *grown = realloc(t->p, cap);
    if (!grown) {
      t->failed = true;
      return;
    }
    t->p = grown;
    t->cap = cap;
  }
  memcpy(t->p + t->len, s, n);
  t->len += n;
  t->p[t->len] = '\0';
}

/* A frame name in a folded line: ';' separates frames and a line ends at
   a newline, so both become '_'. */
static void text_add_name(text_t *t, const char *name) {
  size_t start = t->len;
  text_add(t, name, strlen(name));
  if (t->failed) return;
  for (size_t i = start; i < t->len; i++)
    if (t->p[i] == ';' || t->p[i] == '\n' || t->p[i] == '\r') t->p[i] = '_';
}

static int cmp_str(const void *x, const void *y) {
  return strcmp(*(char *const *)x, *(char *const *)y);
}

/* The folded export's count: value=samples (the default) or cpu_us
   (kind=cpu only); 0, or 400 with *body. */
static unsigned parse_value(query_arg_fn arg, void *ctx, bool *cpu_us, char **body) {
  store_top_query_t q;
  unsigned bad = parse_filters(arg, ctx, true, &q, body);
  if (bad) return bad;
  const char *v = arg(ctx, "value", 0);
  *cpu_us = v && strcmp(v, "cpu_us") == 0;
  if (v && *v && !*cpu_us && strcmp(v, "samples") != 0)
    return *body = error_body("parameter %s: must be samples or cpu_us", "value"), 400;
  if (*cpu_us && strcmp(q.kind, "cpu") != 0)
    return *body = error_body("parameter %s: cpu_us (CPU time) is for kind=cpu only", "value"), 400;
  return 0;
}

unsigned query_export_folded(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                             char **body) {
  *body = NULL;
  bool cpu_us;
  unsigned status = parse_value(arg, ctx, &cpu_us, body);
  if (status) return status;
  stack_set_t set;
  if ((status = collect_stacks(ops, store, arg, ctx, &set, body))) return status;
  char **lines = set.n ? calloc(set.n, sizeof *lines) : NULL;
  bool failed = set.n && !lines;
  for (size_t i = 0; !failed && i < set.n; i++) {
    text_t line = {0};
    size_t depth = json_array_size(set.v[i].names);
    for (size_t k = depth; k-- > 0;) {
      text_add_name(&line, json_string_value(json_array_get(set.v[i].names, k)));
      if (k) text_add(&line, ";", 1);
    }
    char count[32];
    uint64_t v = cpu_us ? set.v[i].value.cpu_us : set.v[i].value.samples;
    int n = snprintf(count, sizeof count, " %llu\n", (unsigned long long)v);
    text_add(&line, count, (size_t)n);
    if (line.failed) free(line.p), failed = true;
    lines[i] = line.failed ? NULL : line.p;
  }
  stack_set_free(&set);
  text_t out = {0};
  text_add(&out, "", 0); /* an empty export is "" */
  if (!failed) {
    if (set.n > 1) qsort(lines, set.n, sizeof *lines, cmp_str);
    for (size_t i = 0; i < set.n; i++)
      text_add(&out, lines[i], strlen(lines[i]));
  }
  for (size_t i = 0; lines && i < set.n; i++)
    free(lines[i]);
  free(lines);
  if (failed || out.failed) {
    free(out.p);
    return *body = error_body("%s", "out of memory"), 503;
  }
  *body = out.p;
  return 200;
}

/* The flame tree. Its depth is the deepest stored stack's (capped at
   ingest, but never trusted here): building, writing and freeing it walk
   with an explicit stack on the heap, never by recursion. */
typedef struct node_s {
  char *name;
  stack_value_t value;
  struct node_s *kids;
  size_t n, cap;
} node_t;

typedef struct walk_s {
  node_t *node;
  size_t next; /* the next child to visit */
} walk_t;

typedef struct path_s {
  walk_t *v;
  size_t n, cap;
} path_t;

static bool path_push(path_t *p, node_t *node) {
  if (p->n == p->cap) {
    size_t cap = p->cap ? 2 * p->cap : 64;
    walk_t *grown = realloc(p->v, cap * sizeof *grown);
    if (!grown) return false;
    p->v = grown;
    p->cap = cap;
  }
  p->v[p->n++] = (walk_t){node, 0};
  return true;
}

/* Post-order: a node's children are freed before its array of them. When
   out of memory for the walk itself, the rest of the tree leaks rather
   than recursing; the walk needs one entry per level, far less than the
   tree it frees. */
static void node_free(node_t *root) {
  path_t p = {0};
  if (!path_push(&p, root)) return;
  while (p.n) {
    walk_t *w = &p.v[p.n - 1];
    if (w->next < w->node->n) {
      if (!path_push(&p, &w->node->kids[w->next++])) break;
      continue;
    }
    free(w->node->kids);
    free(w->node->name);
    p.n--;
  }
  free(p.v);
}

static node_t *node_child(node_t *node, const char *name) {
  for (size_t i = 0; i < node->n; i++)
    if (strcmp(node->kids[i].name, name) == 0) return &node->kids[i];
  if (node->n == node->cap) {
    size_t cap = node->cap ? 2 * node->cap : 4;
    node_t *grown = realloc(node->kids, cap * sizeof *grown);
    if (!grown) return NULL;
    node->kids = grown;
    node->cap = cap;
  }
  node_t *kid = &node->kids[node->n];
  memset(kid, 0, sizeof *kid);
  if (!(kid->name = strdup(name))) return NULL;
  node->n++;
  return kid;
}

/* Children by CPU time (0 for hangs), then samples, then name. */
static int cmp_node(const void *x, const void *y) {
  const node_t *a = x, *b = y;
  if (a->value.cpu_us != b->value.cpu_us) return a->value.cpu_us > b->value.cpu_us ? -1 : 1;
  if (a->value.samples != b->value.samples) return a->value.samples > b->value.samples ? -1 : 1;
  return strcmp(a->name, b->name);
}

/* A JSON string (names are valid UTF-8: ingest repaired them). */
static void text_add_json_string(text_t *t, const char *s) {
  text_add(t, "\"", 1);
  for (const char *run = s;; s++) {
    unsigned char c = (unsigned char)*s;
    if (c && c >= 0x20 && c != '"' && c != '\\') continue;
    text_add(t, run, (size_t)(s - run));
    if (!c) break;
    char esc[8];
    int n = c == '"' || c == '\\' ? snprintf(esc, sizeof esc, "\\%c", c)
                                  : snprintf(esc, sizeof esc, "\\u%04x", c);
    text_add(t, esc, (size_t)n);
    run = s + 1;
  }
  text_add(t, "\"", 1);
}

/* ,"samples":N then "cpu_us":N (cpu) or "hang_ms":ms with its
   nanoseconds as decimals (hang), then the children's opening. */
static void node_open(text_t *t, node_t *node, bool cpu) {
  if (node->n > 1) qsort(node->kids, node->n, sizeof *node->kids, cmp_node);
  char value[96];
  const stack_value_t *v = &node->value;
  int64_t wall = v->wall_ns < 0 ? 0 : v->wall_ns;
  int n = cpu ? snprintf(value, sizeof value, ",\"samples\":%llu,\"cpu_us\":%llu,\"children\":[",
                         (unsigned long long)v->samples, (unsigned long long)v->cpu_us)
              : snprintf(value, sizeof value,
                         ",\"samples\":%llu,\"hang_ms\":%lld.%06lld,\"children\":[",
                         (unsigned long long)v->samples, (long long)(wall / 1000000),
                         (long long)(wall % 1000000));
  text_add(t, "{\"name\":", 8);
  text_add_json_string(t, node->name);
  text_add(t, value, (size_t)n);
}

/* {"name","samples","cpu_us"|"hang_ms","children":[...]}, depth first
   with an explicit path. */
static char *tree_json(node_t *root, bool cpu) {
  text_t t = {0};
  path_t p = {0};
  bool ok = path_push(&p, root);
  if (ok) node_open(&t, root, cpu);
  while (ok && p.n) {
    walk_t *w = &p.v[p.n - 1];
    if (w->next == w->node->n) {
      text_add(&t, "]}", 2);
      p.n--;
      continue;
    }
    if (w->next) text_add(&t, ",", 1);
    node_t *kid = &w->node->kids[w->next++];
    node_open(&t, kid, cpu);
    ok = path_push(&p, kid);
  }
  free(p.v);
  if (!ok || t.failed) return free(t.p), NULL;
  return t.p;
}

unsigned query_flame(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                     char **body) {
  stack_set_t set;
  unsigned status = collect_stacks(ops, store, arg, ctx, &set, body);
  if (status) return status;
  node_t root = {0};
  bool failed = !(root.name = strdup("all"));
  for (size_t i = 0; !failed && i < set.n; i++) {
    node_t *node = &root;
    value_add(&node->value, &set.v[i].value);
    for (size_t k = json_array_size(set.v[i].names); !failed && k-- > 0;) {
      node = node_child(node, json_string_value(json_array_get(set.v[i].names, k)));
      if (!node)
        failed = true;
      else
        value_add(&node->value, &set.v[i].value);
    }
  }
  stack_set_free(&set);
  *body = failed ? NULL : tree_json(&root, set.cpu);
  node_free(&root);
  if (!*body) return *body = error_body("%s", "out of memory"), 503;
  return 200;
}

/* ---- events ------------------------------------------------------------------ */

/* An event with its batch's tags ([{"key","value"}], as the store has them). */
static json_t *event_json(const store_event_row_t *e) {
  json_t *tags = e->tags_json ? json_loads(e->tags_json, 0, NULL) : json_array();
  if (!json_is_array(tags)) {
    json_decref(tags);
    return NULL;
  }
  return json_pack("{s:I, s:s?, s:I, s:f, s:I, s:i, s:s?, s:s?, s:s?, s:s?, s:s?, s:s?, s:o}", "id",
                   (json_int_t)e->id, "kind", e->kind, "start_ms",
                   (json_int_t)(e->start_ns / 1000000), "duration_ms", ms(e->duration_ns), "tid",
                   (json_int_t)e->tid, "cpu_percent", (int)e->cpu_percent, "reason", e->reason,
                   "label", e->label, "app", e->app, "version", e->version, "environment",
                   e->environment, "group", e->group_sig, "tags", tags);
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
  unsigned bad = parse_filters(arg, ctx, false, &q, body);
  if (!bad) bad = parse_limit(arg, ctx, &limit, body);
  if (bad) return bad;
  event_list_t l = {json_array(), 0, false};
  int rc = l.events ? ops->event_rows(store, &q, limit, on_event_row, &l) : STORE_ERROR;
  if (rc != STORE_OK && !l.truncated) {
    json_decref(l.events);
    return *body = error_body("%s", "the store failed or ran out of memory"), 503;
  }
  json_t *o = json_pack("{s:o, s:b}", "events", l.events, "truncated", l.truncated);
  *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!*body) return *body = error_body("%s", "out of memory"), 503;
  return 200;
}

/* ---- drops ------------------------------------------------------------------- */

unsigned query_drops(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                     char **body) {
  *body = NULL;
  store_top_query_t q;
  unsigned bad = parse_filters(arg, ctx, false, &q, body);
  if (bad) return bad;
  /* Drops are the batches', not an event kind's or a group's. */
  if (q.kind) return *body = error_body("parameter %s: not a filter of drops", "kind"), 400;
  if (q.group) return *body = error_body("parameter %s: not a filter of drops", "group"), 400;
  if (q.label) return *body = error_body("parameter %s: not a filter of drops", "label"), 400;
  store_drops_t d;
  if (ops->drops(store, &q, &d) != STORE_OK)
    return *body = error_body("%s", "the store failed or ran out of memory"), 503;
  json_t *o = json_object();
  for (int i = 0; o && i < STORE_DROP_COUNT; i++)
    if (json_object_set_new(o, store_drop_name((enum store_drop_reason)i),
                            json_integer((json_int_t)d.dropped[i])) != 0)
      json_decref(o), o = NULL;
  if (o && json_object_set_new(o, "batches", json_integer((json_int_t)d.batches)) != 0)
    json_decref(o), o = NULL;
  *body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (!*body) return *body = error_body("%s", "out of memory"), 503;
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
} series_t;

static int on_bucket(const store_bucket_row_t *row, void *user) {
  series_t *s = user;
  s->n++;
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
  return error_body("%s", text);
}

unsigned query_timeseries(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body) {
  *body = NULL;
  store_top_query_t q;
  unsigned bad = parse_filters(arg, ctx, true, &q, body);
  if (bad) return bad;
  if (q.group) return *body = error_body("parameter %s: not a filter of timeseries", "group"), 400;
  const char *name = arg(ctx, "bucket", 0);
  int64_t bucket_ns = 0;
  for (size_t i = 0; name && i < sizeof BUCKETS / sizeof BUCKETS[0]; i++)
    if (strcmp(name, BUCKETS[i].name) == 0) bucket_ns = BUCKETS[i].ms * 1000000;
  if (!bucket_ns)
    return *body = error_body("parameter %s: must be minute, hour or day", "bucket"), 400;
  /* A range given whole is judged by its length alone, whatever it holds. */
  if (arg(ctx, "from", 0) && arg(ctx, "to", 0) &&
      q.to_ns / bucket_ns - q.from_ns / bucket_ns >= QUERY_MAX_POINTS)
    return *body = too_many_points("from..to"), 400;
  series_t s = {json_array(), 0};
  int rc = s.points ? ops->time_buckets(store, &q, bucket_ns, QUERY_MAX_POINTS + 1, on_bucket, &s)
                    : STORE_ERROR;
  if (rc != STORE_OK) {
    json_decref(s.points);
    return *body = error_body("%s", "the store failed or ran out of memory"), 503;
  }
  if (s.n > QUERY_MAX_POINTS) {
    json_decref(s.points);
    return *body = too_many_points("the matching events"), 400;
  }
  json_t *o =
      json_pack("{s:I, s:o}", "bucket_ms", (json_int_t)(bucket_ns / 1000000), "points", s.points);
  *body = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
  json_decref(o);
  if (!*body) return *body = error_body("%s", "out of memory"), 503;
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
    if (json_object_set_new(stack, "hang_ms", json_real(ms(ns))) != 0) return false;
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
  json_t *frames = text ? frames_shown(text) : json_array();
  json_t *names = text ? frame_names(text) : json_array();
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
  if (!parse_uint(id_text, INT64_MAX, &id) || id < 1)
    return *body = error_body("no event %s", "with that id"), 404;
  detail_t d = {.threads = json_array(), .stacks = json_array()};
  int rc = d.threads && d.stacks
               ? ops->event_detail(store, id, on_detail_event, on_detail_count, &d)
               : STORE_ERROR;
  unsigned status = 200;
  if (rc == STORE_NOT_FOUND) {
    status = 404;
    *body = error_body("no event %s", "with that id");
  } else if (rc != STORE_OK || !d.event) {
    status = 503;
    *body = error_body("%s", "the store failed or ran out of memory");
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
      *body = error_body("%s", "out of memory");
    }
  }
  json_decref(d.event);
  json_decref(d.threads);
  json_decref(d.stacks);
  return status;
}
