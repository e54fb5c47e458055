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
/* Append s as a report prints a string: '"', '\\', newline and tab as
   \", \\, \n, \t, other control characters as \xNN, every other byte as
   it is; s NULL appends nothing. One line stays one line whatever s holds
   (a label, a reason, a thread or function name). */
int perf__strbuf_append_escaped(perf__strbuf_t *b, const char *s);

/* Whether s holds a byte perf__strbuf_append_escaped would escape. */
int perf__text_needs_escape(const char *s);

/* Hand the text to the caller (free() it; never NULL on success: an empty
   buffer yields ""); the buffer is left empty. */
int perf__strbuf_take(perf__strbuf_t *b, char **out);
void perf__strbuf_free(perf__strbuf_t *b);

#endif
