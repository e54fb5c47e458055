/*
 * stacks.c - the folded export and the flame graph (see stacks.h): the
 * store streams each distinct stack's sums, heaviest first; the stacks are
 * named by their frames' labels and written as folded lines or a tree.
 */
#include "collector/api/stacks.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collector/api/frames.h"
#include "collector/model/blocking_call.h"

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
  json_t *names;  /* innermost first */
  json_t *in_app; /* whether each frame is the app's (the flame's sets only), else NULL */
  stack_value_t value;
} stack_entry_t;

/* The stacks of an export, at most STORE_STACK_ROWS_MAX of them (the
   store sums the rest in one row) and QUERY_MAX_STACK_TEXT bytes of stored
   frames: the store sends the heaviest first, and every stack past either
   cap only adds its values to `truncated`, shown as one stack of a single
   QUERY_TRUNCATED frame, so totals stay exact. */
typedef struct stack_set_s {
  bool cpu;    /* kind=cpu or profile: CPU time (else hang: wall time) */
  bool in_app; /* judge each frame in-app (the flame's colours) */
  stack_entry_t *v;
  size_t n, cap;
  size_t text; /* stored frames JSON read so far */
  stack_value_t truncated;
  uint64_t omitted;  /* the stacks in `truncated` */
  query_rows_t rows; /* the rows the store summed, and its limit */
  bool failed;
} stack_set_t;

static int on_stack_row(const store_stack_row_t *row, void *user) {
  stack_set_t *set = user;
  query_rows_seen(&set->rows, row->rows_read, row->rows_limit);
  if (row->samples == 0) return 0;
  stack_value_t value = {row->samples, row->cpu_us, row->wall_ns};
  size_t len = row->frames_json ? strlen(row->frames_json) : 0;
  if (!row->stack_sig || set->truncated.samples || len > QUERY_MAX_STACK_TEXT - set->text) {
    value_add(&set->truncated, &value);
    set->omitted += row->stack_sig ? 1 : row->stacks;
    return 0;
  }
  set->text += len;
  json_t *names = NULL, *in_app = NULL;
  if (set->in_app)
    query_frame_names_in_app(row->frames_json, &names, &in_app);
  else
    names = query_frame_names(row->frames_json);
  if (!names) return set->failed = true, 1;
  if (json_array_size(names) == 0) {
    json_decref(names), json_decref(in_app);
    return 0;
  }
  if (set->n == set->cap) {
    size_t cap = set->cap ? 2 * set->cap : 64;
    stack_entry_t *grown = realloc(set->v, cap * sizeof *grown);
    if (!grown) return json_decref(names), json_decref(in_app), set->failed = true, 1;
    set->v = grown;
    set->cap = cap;
  }
  set->v[set->n++] = (stack_entry_t){names, in_app, value};
  return 0;
}

static void stack_set_free(stack_set_t *set) {
  for (size_t i = 0; i < set->n; i++)
    json_decref(set->v[i].names), json_decref(set->v[i].in_app);
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
  set->v[set->n++] = (stack_entry_t){names, NULL, set->truncated};
  return true;
}

/* Parameters, then the stacks of q; 0 when set is filled, else the status
   with *body. */
static unsigned collect_stacks(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                               bool in_app, stack_set_t *set, char **body) {
  *body = NULL;
  memset(set, 0, sizeof *set);
  set->in_app = in_app;
  store_top_query_t q;
  unsigned bad = query_stack_filters(arg, ctx, &q, body);
  if (bad) return bad;
  set->cpu = store_kind_cpu_time(q.kind);
  if (ops->stack_rows(store, &q, on_stack_row, set) != STORE_OK || set->failed ||
      !add_truncated_stack(set)) {
    stack_set_free(set);
    return *body = query_error_param("%s", "the store failed or ran out of memory"), 503;
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
   (kind=cpu or profile only); 0, or 400 with *body. */
static unsigned parse_value(query_arg_fn arg, void *ctx, bool *cpu_us, char **body) {
  store_top_query_t q;
  unsigned bad = query_stack_filters(arg, ctx, &q, body);
  if (bad) return bad;
  const char *v = arg(ctx, "value", 0);
  *cpu_us = v && strcmp(v, "cpu_us") == 0;
  if (v && *v && !*cpu_us && strcmp(v, "samples") != 0)
    return *body = query_error_param("parameter %s: must be samples or cpu_us", "value"), 400;
  if (*cpu_us && !store_kind_cpu_time(q.kind))
    return *body = query_error_param(
               "parameter %s: cpu_us (CPU time) is for kind=cpu or kind=profile only", "value"),
           400;
  return 0;
}

unsigned query_export_folded(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                             char **body) {
  *body = NULL;
  bool cpu_us;
  unsigned status = parse_value(arg, ctx, &cpu_us, body);
  if (status) return status;
  stack_set_t set;
  if ((status = collect_stacks(ops, store, arg, ctx, false, &set, body))) return status;
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
  if (query_rows_cut(&set.rows)) {
    char cut[160];
    int n = snprintf(cut, sizeof cut, "# truncated: rows_read=%llu rows_limit=%llu\n",
                     (unsigned long long)set.rows.read, (unsigned long long)set.rows.limit);
    text_add(&out, cut, (size_t)n);
  }
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
    return *body = query_error_param("%s", "out of memory"), 503;
  }
  *body = out.p;
  return 200;
}

/* The flame tree. Its depth is the deepest stored stack's (capped at
   ingest, but never trusted here): building, writing and freeing it walk
   with an explicit stack on the heap, never by recursion. */
typedef struct node_s {
  char *name;
  int in_app;                /* the frame is the app's: 1, not: 0, unknown (the root): -1 */
  stack_value_t value, base; /* base: the baseline's, in a diff */
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
  kid->in_app = -1;
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

/* How a tree is written: its kind and, in a diff, both sides' totals
   (the roots' values). */
typedef struct tree_fmt_s {
  bool cpu, diff;
  stack_value_t total, base_total;
} tree_fmt_t;

/* A value's time: CPU (cpu) or the hangs' wall time (hang). */
static double value_time(const stack_value_t *v, bool cpu) {
  return cpu ? (double)v->cpu_us : (double)(v->wall_ns < 0 ? 0 : v->wall_ns);
}

/* v's share of total: of its time, or of its samples when the side's
   events carry no time (CPU events of SDKs that did not weigh samples). */
static double share_of(const stack_value_t *v, const stack_value_t *total, bool cpu) {
  double all = value_time(total, cpu);
  if (all > 0) return value_time(v, cpu) / all;
  return total->samples ? (double)v->samples / (double)total->samples : 0;
}

/* ,"<prefix>samples":N then "<prefix>cpu_us":N (cpu) or
   "<prefix>hang_ms":ms with its nanoseconds as decimals (hang). */
static void value_text(text_t *t, const stack_value_t *v, bool cpu, const char *prefix) {
  char value[128];
  int64_t wall = v->wall_ns < 0 ? 0 : v->wall_ns;
  int n = cpu ? snprintf(value, sizeof value, ",\"%ssamples\":%llu,\"%scpu_us\":%llu", prefix,
                         (unsigned long long)v->samples, prefix, (unsigned long long)v->cpu_us)
              : snprintf(value, sizeof value, ",\"%ssamples\":%llu,\"%shang_ms\":%lld.%06lld",
                         prefix, (unsigned long long)v->samples, prefix,
                         (long long)(wall / 1000000), (long long)(wall % 1000000));
  text_add(t, value, (size_t)n);
}

/* {"name", the value's fields, in a diff also the baseline's ("base_")
   and each side's share of its total time ("share", "base_share") and
   their difference ("delta", share - base_share), then extra (the root's
   fields), then the children's opening. */
static void node_open(text_t *t, node_t *node, const tree_fmt_t *f, const char *extra) {
  if (node->n > 1) qsort(node->kids, node->n, sizeof *node->kids, cmp_node);
  text_add(t, "{\"name\":", 8);
  text_add_json_string(t, node->name);
  if (node->in_app >= 0) {
    const char *app = node->in_app ? ",\"in_app\":true" : ",\"in_app\":false";
    text_add(t, app, strlen(app));
  }
  /* A blocking call outside the app: the frame of a thread that waits. */
  if (node->in_app != 1 && blocking_call_is(node->name)) text_add(t, ",\"waiting\":true", 15);
  value_text(t, &node->value, f->cpu, "");
  if (f->diff) {
    value_text(t, &node->base, f->cpu, "base_");
    double share = share_of(&node->value, &f->total, f->cpu);
    double base_share = share_of(&node->base, &f->base_total, f->cpu);
    char shares[128];
    int n = snprintf(shares, sizeof shares, ",\"share\":%.6f,\"base_share\":%.6f,\"delta\":%.6f",
                     share, base_share, share - base_share);
    text_add(t, shares, (size_t)n);
  }
  text_add(t, extra, strlen(extra));
  text_add(t, ",\"children\":[", 13);
}

/* {"name","samples","cpu_us"|"hang_ms","children":[...]}, depth first
   with an explicit path; the root also says whether stacks were left out
   ("truncated", "stacks_omitted": summed into its QUERY_TRUNCATED child)
   or the store's read stopped at its row limit ("truncated", "rows_read",
   "rows_limit"). */
static char *tree_json(node_t *root, const tree_fmt_t *f, uint64_t omitted,
                       const query_rows_t *rows) {
  text_t t = {0};
  path_t p = {0};
  char extra[160], cut[96] = "";
  if (query_rows_cut(rows)) query_rows_text(rows, cut, sizeof cut);
  snprintf(extra, sizeof extra, ",\"truncated\":%s,\"stacks_omitted\":%llu%s",
           omitted || cut[0] ? "true" : "false", (unsigned long long)omitted, cut);
  bool ok = path_push(&p, root);
  if (ok) node_open(&t, root, f, extra);
  while (ok && p.n) {
    walk_t *w = &p.v[p.n - 1];
    if (w->next == w->node->n) {
      text_add(&t, "]}", 2);
      p.n--;
      continue;
    }
    if (w->next) text_add(&t, ",", 1);
    node_t *kid = &w->node->kids[w->next++];
    node_open(&t, kid, f, "");
    ok = path_push(&p, kid);
  }
  free(p.v);
  if (!ok || t.failed) return free(t.p), NULL;
  return t.p;
}

/* Add set's stacks to the tree under root, into each node's value (or,
   base, its baseline's); false when out of memory. */
static bool tree_add(node_t *root, const stack_set_t *set, bool base) {
  for (size_t i = 0; i < set->n; i++) {
    node_t *node = root;
    value_add(base ? &node->base : &node->value, &set->v[i].value);
    for (size_t k = json_array_size(set->v[i].names); k-- > 0;) {
      node = node_child(node, json_string_value(json_array_get(set->v[i].names, k)));
      if (!node) return false;
      value_add(base ? &node->base : &node->value, &set->v[i].value);
      /* A name the app's in any stack through it is the app's. */
      json_t *app = json_array_get(set->v[i].in_app, k);
      if (json_is_boolean(app) && node->in_app != 1) node->in_app = json_is_true(app);
    }
  }
  return true;
}

unsigned query_flame(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                     char **body) {
  stack_set_t set;
  unsigned status = collect_stacks(ops, store, arg, ctx, true, &set, body);
  if (status) return status;
  node_t root = {.in_app = -1};
  bool failed = !(root.name = strdup("all")) || !tree_add(&root, &set, false);
  stack_set_free(&set);
  tree_fmt_t f = {.cpu = set.cpu};
  *body = failed ? NULL : tree_json(&root, &f, set.omitted, &set.rows);
  node_free(&root);
  if (!*body) return *body = query_error_param("%s", "out of memory"), 503;
  return 200;
}

/* The baseline's parameters: base_version, base_from and base_to in place
   of version, from and to where given; every other filter shared. */
typedef struct base_args_s {
  query_arg_fn arg;
  void *ctx;
} base_args_t;

static const char *const BASE_PARAMS[] = {"version", "from", "to"};

static const char *base_arg(void *ctx, const char *name, size_t nth) {
  const base_args_t *b = ctx;
  for (size_t i = 0; i < sizeof BASE_PARAMS / sizeof *BASE_PARAMS; i++)
    if (strcmp(name, BASE_PARAMS[i]) == 0) {
      char key[16];
      snprintf(key, sizeof key, "base_%s", name);
      const char *v = b->arg(b->ctx, key, nth);
      if (v) return v;
    }
  return b->arg(b->ctx, name, nth);
}

/* A baseline's error names the parameter given: "parameter from: ..."
   of a base_from says base_from. */
static unsigned base_error(query_arg_fn arg, void *ctx, unsigned status, char **body) {
  for (size_t i = 0; *body && i < sizeof BASE_PARAMS / sizeof *BASE_PARAMS; i++) {
    char key[16], said[32];
    snprintf(key, sizeof key, "base_%s", BASE_PARAMS[i]);
    snprintf(said, sizeof said, "parameter %s:", BASE_PARAMS[i]);
    json_t *o = json_loads(*body, 0, NULL);
    const char *text = json_string_value(json_object_get(o, "error"));
    if (arg(ctx, key, 0) && text && strncmp(text, said, strlen(said)) == 0) {
      char *named = malloc(strlen(text) + 8);
      if (named) sprintf(named, "parameter %s:%s", key, text + strlen(said));
      free(*body);
      *body = named ? query_error_param("%s", named) : NULL;
      free(named);
    }
    json_decref(o);
  }
  return status;
}

unsigned query_flame_diff(const store_ops_t *ops, store_t *store, query_arg_fn arg, void *ctx,
                          char **body) {
  *body = NULL;
  base_args_t b = {arg, ctx};
  bool has_base = false;
  for (size_t i = 0; i < sizeof BASE_PARAMS / sizeof *BASE_PARAMS; i++) {
    char key[16];
    snprintf(key, sizeof key, "base_%s", BASE_PARAMS[i]);
    has_base |= arg(ctx, key, 0) != NULL;
  }
  if (!has_base)
    return *body = query_error_param("parameter %s: a diff needs a baseline (base_version, "
                                     "base_from or base_to)",
                                     "base_version"),
           400;
  stack_set_t set, base;
  unsigned status = collect_stacks(ops, store, arg, ctx, true, &set, body);
  if (status) return status;
  if ((status = collect_stacks(ops, store, base_arg, &b, true, &base, body))) {
    stack_set_free(&set);
    return base_error(arg, ctx, status, body);
  }
  node_t root = {.in_app = -1};
  bool failed = !(root.name = strdup("all")) || !tree_add(&root, &set, false) ||
                !tree_add(&root, &base, true);
  tree_fmt_t f = {.cpu = set.cpu, .diff = true, .total = root.value, .base_total = root.base};
  /* Either side's cut makes the diff's (the larger read said). */
  query_rows_t rows = query_rows_cut(&base.rows) ? base.rows : set.rows;
  *body = failed ? NULL : tree_json(&root, &f, set.omitted + base.omitted, &rows);
  stack_set_free(&set);
  stack_set_free(&base);
  node_free(&root);
  if (!*body) return *body = query_error_param("%s", "out of memory"), 503;
  return 200;
}
