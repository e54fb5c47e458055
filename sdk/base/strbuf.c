/*
 * strbuf.c - bounded growable text buffer (see strbuf.h). Any thread but the
 * signal handler.
 */
#include "sdk/base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_sdk.h"

static int reserve(perf__strbuf_t *b, size_t need);

void perf__strbuf_init(perf__strbuf_t *b, size_t max) {
  memset(b, 0, sizeof *b);
  b->max = max;
}

int perf__strbuf_appendf(perf__strbuf_t *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) return PERF_E_INVALID_ARGUMENT;
  int err = reserve(b, b->len + (size_t)n + 1);
  if (err) return err;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
  return PERF_OK;
}

static int escaped_byte(unsigned char c) {
  return c == '"' || c == '\\' || c < 0x20 || c == 0x7f;
}

int perf__strbuf_append_escaped(perf__strbuf_t *b, const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  int err = PERF_OK;
  while (p && *p && !err) {
    size_t run = 0;
    while (p[run] && !escaped_byte(p[run]))
      run++;
    if (run) {
      err = perf__strbuf_appendf(b, "%.*s", (int)run, (const char *)p);
      p += run;
    } else {
      if (*p == '"' || *p == '\\')
        err = perf__strbuf_appendf(b, "\\%c", *p);
      else if (*p == '\n' || *p == '\t')
        err = perf__strbuf_appendf(b, "\\%c", *p == '\n' ? 'n' : 't');
      else
        err = perf__strbuf_appendf(b, "\\x%02x", *p);
      p++;
    }
  }
  return err;
}

int perf__text_needs_escape(const char *s) {
  for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
    if (escaped_byte(*p)) return 1;
  return 0;
}

int perf__strbuf_take(perf__strbuf_t *b, char **out) {
  int err = reserve(b, b->len + 1);
  if (err) return err;
  b->data[b->len] = '\0';
  *out = b->data;
  perf__strbuf_init(b, b->max);
  return PERF_OK;
}

void perf__strbuf_free(perf__strbuf_t *b) {
  free(b->data);
  perf__strbuf_init(b, b->max);
}

static int reserve(perf__strbuf_t *b, size_t need) {
  if (need <= b->cap) return PERF_OK;
  if (need > b->max) return PERF_E_NO_MEMORY;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need)
    cap *= 2;
  if (cap > b->max) cap = b->max;
  char *grown = realloc(b->data, cap);
  if (!grown) return PERF_E_NO_MEMORY;
  b->data = grown;
  b->cap = cap;
  return PERF_OK;
}
