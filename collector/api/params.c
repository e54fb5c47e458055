/*
 * params.c - the read-only API's parameters and errors (see params.h).
 */
#include "collector/api/params.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/utf8.h"

char *query_error_param(const char *fmt, const char *param) {
  char text[200]; /* as long as too_many_points' text: -O3 checks the bound */
  snprintf(text, sizeof text, fmt, param);
  json_t *o = json_pack("{s:s}", "error", text);
  char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return body;
}

char *query_error_json(const char *text) {
  return query_error_param("%s", text);
}

unsigned query_check_text(const char *name, const char *value, char **body) {
  if (perf__utf8_valid(name) && (!value || perf__utf8_valid(value))) return 0;
  char *shown = perf__utf8_sanitize(name);
  if (shown) shown[perf__utf8_prefix(shown, 64)] = '\0'; /* the error's text stays whole */
  *body = shown ? query_error_param("parameter %s: not UTF-8 text (a percent-escape such as %%FF "
                                    "decodes to bytes that are not)",
                                    shown)
                : NULL;
  free(shown);
  return 400;
}

double query_ms(int64_t ns) {
  return (double)ns / 1e6;
}

/* A decimal integer in 0..max (digits only: no sign, no spaces, no hex),
   read in 64 bits with strtoll's errno; false when it is not one. */
bool query_parse_uint(const char *text, long long max, long long *out) {
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

/* One tag=key:value split: the key ends at the first colon that no
   backslash escapes. In the key, backslash-colon is a colon and two
   backslashes are one, so a key a batch holds with a colon (from a client
   other than this SDK, which refuses such keys at init) is matched too;
   any other backslash is itself, and the value is the rest as it is. An
   escaped key is unescaped into buf (size bytes). NULL, or the error's
   text. */
static const char *split_tag(const char *text, char *buf, size_t size, store_tag_t *t) {
  size_t n = 0;
  bool escaped = false;
  const char *p = text;
  for (; *p && *p != ':'; p++, n++) {
    char c = *p;
    if (c == '\\' && (p[1] == ':' || p[1] == '\\')) c = *++p, escaped = true;
    if (n < size) buf[n] = c;
  }
  if (!*p) return "must be key:value";
  if (p == text) return "the key before the colon is empty";
  if (escaped && n >= size) return "an escaped key is at most 255 bytes";
  *t = (store_tag_t){text, p + 1, (size_t)(p - text)};
  if (escaped) buf[n] = '\0', t->key = buf, t->key_len = n;
  return NULL;
}

/* tag=key:value, repeatable (all required), split by split_tag: the key
   not empty, the value may be; an empty tag= means nothing. */
static unsigned parse_tags(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body) {
  const char *text;
  for (size_t nth = 0; (text = arg(ctx, "tag", nth)) != NULL; nth++) {
    if (!*text) continue;
    _Static_assert(STORE_MAX_TAG_FILTERS == 4, "the message says 4");
    if (q->n_tags == STORE_MAX_TAG_FILTERS)
      return *body = query_error_param("parameter %s: at most 4 tags at once", "tag"), 400;
    _Static_assert(STORE_TAG_KEY_ESCAPED_MAX == 256, "the message says 255");
    const char *bad =
        split_tag(text, q->tag_keys[q->n_tags], sizeof q->tag_keys[0], &q->tags[q->n_tags]);
    if (bad) {
      char fmt[80];
      snprintf(fmt, sizeof fmt, "parameter %%s: %s", bad);
      return *body = query_error_param(fmt, "tag"), 400;
    }
    q->n_tags++;
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

/* Which kinds a route takes: the stack rollups are per hang, cpu or
   profile (a fatal hang is one of the hangs there); a list of events, or a
   count of them, takes every kind the SDK sends. */
enum kinds { KINDS_STACKS, KINDS_EVENTS };

/* The kinds of the wire's events (ingest.c names them); the stacks' first. */
static const char *const EVENT_KINDS[] = {"hang", "cpu", "profile", "fatal_hang", "manual"};

static bool kind_known(const char *kind, enum kinds kinds) {
  size_t n = kinds == KINDS_STACKS ? 3 : sizeof EVENT_KINDS / sizeof EVENT_KINDS[0];
  for (size_t i = 0; i < n; i++)
    if (strcmp(kind, EVENT_KINDS[i]) == 0) return true;
  return false;
}

/* kind (required, or optional: then also absent or empty; one of kinds),
   app, version, environment, host, tag, from, to, group, label and loop
   (with_loop; else a loop is refused) into q; 0, or 400 with *body the
   error. */
static unsigned parse_filters(query_arg_fn arg, void *ctx, bool kind_required, enum kinds kinds,
                              bool with_loop, store_top_query_t *q, char **body) {
  *q = (store_top_query_t){.from_ns = 0, .to_ns = INT64_MAX};
  const char *kind = arg(ctx, "kind", 0);
  if (!kind_required && kind && !*kind) kind = NULL;
  if ((kind_required || kind) && (!kind || !kind_known(kind, kinds)))
    return *body = query_error_param(kinds == KINDS_STACKS
                                         ? "parameter %s: must be hang, cpu or profile (stacks are "
                                           "summed per hang, cpu or profile; a fatal hang is one "
                                           "of the hangs)"
                                         : "parameter %s: must be hang, fatal_hang, cpu, manual "
                                           "or profile",
                                     "kind"),
           400;
  q->kind = kind;
  q->app = filter(arg, ctx, "app");
  q->version = filter(arg, ctx, "version");
  q->environment = filter(arg, ctx, "environment");
  q->host = filter(arg, ctx, "host");
  unsigned bad = parse_tags(arg, ctx, q, body);
  if (bad) return bad;
  q->group = filter(arg, ctx, "group");
  q->label = filter(arg, ctx, "label");
  q->loop = filter(arg, ctx, "loop");
  if (q->loop && !with_loop) /* the rollups keep no loop: an answer would ignore it */
    return *body = query_error_param("parameter %s: only a filter of events", "loop"), 400;
  if (q->group && (strlen(q->group) > STORE_SIG_CHARS ||
                   strspn(q->group, "0123456789abcdef") != strlen(q->group)))
    return *body = query_error_param("parameter %s: must be a group's signature (lowercase hex)",
                                     "group"),
           400;
  long long v;
  const char *from = arg(ctx, "from", 0), *to = arg(ctx, "to", 0);
  if (from) {
    if (!query_parse_uint(from, MAX_MS, &v))
      return *body = query_error_param("parameter %s: must be unix milliseconds, 0..9223372036854",
                                       "from"),
             400;
    q->from_ns = (int64_t)v * 1000000;
  }
  if (to) {
    if (!query_parse_uint(to, MAX_MS, &v))
      return *body = query_error_param("parameter %s: must be unix milliseconds, 0..9223372036854",
                                       "to"),
             400;
    q->to_ns = end_of_ms(v); /* the whole millisecond */
  }
  if (q->from_ns > q->to_ns)
    return *body = query_error_param("parameter %s: must not be before from", "to"), 400;
  return 0;
}

unsigned query_limit(query_arg_fn arg, void *ctx, long long *limit, char **body) {
  const char *limit_text = arg(ctx, "limit", 0);
  *limit = QUERY_LIMIT_DEFAULT;
  if (limit_text && (!query_parse_uint(limit_text, QUERY_LIMIT_MAX, limit) || *limit < 1))
    return *body = query_error_param("parameter %s: must be 1..1000", "limit"), 400;
  return 0;
}

unsigned query_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body) {
  return parse_filters(arg, ctx, false, KINDS_EVENTS, false, q, body);
}

unsigned query_event_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body) {
  return parse_filters(arg, ctx, false, KINDS_EVENTS, true, q, body);
}

unsigned query_stack_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body) {
  *body = NULL;
  return parse_filters(arg, ctx, true, KINDS_STACKS, false, q, body);
}

unsigned query_series_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body) {
  *body = NULL;
  return parse_filters(arg, ctx, true, KINDS_EVENTS, false, q, body);
}

void query_rows_seen(query_rows_t *r, uint64_t rows_read, uint64_t rows_limit) {
  r->read = rows_read;
  r->limit = rows_limit;
}

bool query_rows_cut(const query_rows_t *r) {
  return r->limit && r->read >= r->limit;
}

int query_rows_json(json_t *o, const query_rows_t *r) {
  return json_object_set_new(o, "rows_read", json_integer((json_int_t)r->read)) ||
                 json_object_set_new(o, "rows_limit", json_integer((json_int_t)r->limit))
             ? -1
             : 0;
}

void query_rows_text(const query_rows_t *r, char *buf, size_t size) {
  snprintf(buf, size, ",\"rows_read\":%llu,\"rows_limit\":%llu", (unsigned long long)r->read,
           (unsigned long long)r->limit);
}
