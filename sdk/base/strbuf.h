/*
 * strbuf.h - a growable text buffer with a maximum size fixed at creation
 * (in the manner of curl's dynbuf). Appending past the maximum fails with
 * PERF_E_NO_MEMORY and leaves the content as it was. Not for signal handlers.
 */
#ifndef PERF_STRBUF_H
#define PERF_STRBUF_H

#include <stddef.h>

typedef struct perf__strbuf_s {
  char *data; /* NUL-terminated when non-NULL */
  size_t len, cap, max;
} perf__strbuf_t;

void perf__strbuf_init(perf__strbuf_t *b, size_t max);
int perf__strbuf_appendf(perf__strbuf_t *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Hand the text to the caller (free() it; never NULL on success: an empty
   buffer yields ""); the buffer is left empty. */
int perf__strbuf_take(perf__strbuf_t *b, char **out);
void perf__strbuf_free(perf__strbuf_t *b);

#endif
