/*
 * params.h - the query-string parameters of the read-only API, checked
 * once for every endpoint: the common filters into a store_top_query_t,
 * limit, and the JSON errors naming the bad parameter. Independent of HTTP:
 * the caller hands a lookup for the parameters (query_arg_fn).
 */
#ifndef PERF_COLLECTOR_API_PARAMS_H
#define PERF_COLLECTOR_API_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "collector/store/store.h"

/* The nth value (0: the first) of a query-string parameter by name; NULL
   when it has fewer. Only tag is read past its first value. */
typedef const char *(*query_arg_fn)(void *ctx, const char *name, size_t nth);

#define QUERY_LIMIT_DEFAULT 20
#define QUERY_LIMIT_MAX 1000

/* The filters of the stack exports (export/folded, flame, pprof, states):
   kind (required, hang|cpu: the rollups are per hang or cpu; other kinds
   get 400 naming kind and the two it takes), app, version, environment, host, tag
   (key:value, repeatable, at most STORE_MAX_TAG_FILTERS, split at the first
   colon no backslash escapes, the key not empty; in the key backslash-colon
   is a colon and two backslashes one), from, to (unix milliseconds, inclusive),
   group, label into *q (pointing into the arguments' text). 0, or 400 with
   *body the JSON error naming the parameter (malloc'ed, the caller frees).
   A loop is refused (400 naming it): these answers come from the rollups,
   which keep no loop. */
unsigned query_stack_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body);

/* The same with kind required and any kind of event: hang (with the
   fatal hangs), fatal_hang, cpu or manual, as timeseries takes them (it
   counts events, not stacks). */
unsigned query_series_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body);

/* The same with kind optional (hang, fatal_hang, cpu or manual; absent or
   empty: any), as drops takes them (loop refused). */
unsigned query_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body);

/* The events list's, loops' and versions/compare's: query_filters' and
   loop (a loop's name, exactly: "main" or a name the SDK registered). */
unsigned query_event_filters(query_arg_fn arg, void *ctx, store_top_query_t *q, char **body);

/* limit: 1..QUERY_LIMIT_MAX, QUERY_LIMIT_DEFAULT when absent; 0, or 400
   with *body. */
unsigned query_limit(query_arg_fn arg, void *ctx, long long *limit, char **body);

/* A decimal integer in 0..max (digits only: no sign, no spaces, no hex);
   false when text is not one. */
bool query_parse_uint(const char *text, long long max, long long *out);

/* One query-string argument checked before any handler reads it: a name
   and a value that are UTF-8 text (a percent-escape such as %FF decodes to
   bytes that are not, which no stored text can match and JSON cannot
   carry). 0, or 400 with *body the JSON error naming the parameter (its
   bad bytes shown as U+FFFD; malloc'ed, the caller frees). value may be
   NULL ("?name" without "="). */
unsigned query_check_text(const char *name, const char *value, char **body);

/* {"error":"<text>"} (malloc'ed, the caller frees; NULL when out of memory). */
char *query_error_json(const char *text);

/* {"error":"<fmt with param>"}, fmt holding one %s (at most 200 bytes). */
char *query_error_param(const char *fmt, const char *param);

/* The rows a bounded read (store.h top_rows, stack_rows) summed and its
   limit (--max-read-rows), as its rows say; cut: it stopped at the limit,
   so the answer may leave stored rows out (docs/api.md "Bounded reads"). */
typedef struct query_rows_s {
  uint64_t read, limit;
} query_rows_t;

/* r from a row of the read (the last one seen says it). */
void query_rows_seen(query_rows_t *r, uint64_t rows_read, uint64_t rows_limit);
bool query_rows_cut(const query_rows_t *r);

/* "rows_read" and "rows_limit" set in the JSON object o (jansson's); 0, or
   -1 when out of memory. */
struct json_t;
int query_rows_json(struct json_t *o, const query_rows_t *r);

/* The same as text: ,"rows_read":N,"rows_limit":M into buf. */
void query_rows_text(const query_rows_t *r, char *buf, size_t size);

/* Nanoseconds as milliseconds, the API's unit of durations. */
double query_ms(int64_t ns);

#endif
