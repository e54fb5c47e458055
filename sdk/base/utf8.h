/*
 * utf8.h - text from outside made safe for JSON: function names read from
 * ELF symbol tables and strings set by the app are bytes, not necessarily
 * UTF-8, and jansson refuses what is not. Pure functions; any thread.
 */
#ifndef PERF_UTF8_H
#define PERF_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* The length (1-4) of the well-formed UTF-8 sequence at p[0..n), n > 0;
   0 when it is not one (bad lead or continuation byte, overlong form,
   a surrogate, past U+10FFFF, or cut short by n). */
size_t perf__utf8_seq(const unsigned char *p, size_t n);

/* The length of the longest prefix of s (NUL-terminated) of at most max
   bytes that does not cut a well-formed sequence in two (a byte that
   starts none counts as one). Async-signal-safe. */
size_t perf__utf8_prefix(const char *s, size_t max);

/* s (NUL-terminated) is entirely well-formed UTF-8. */
bool perf__utf8_valid(const char *s);

/* A copy of s with every byte that starts no well-formed sequence replaced
   by U+FFFD; malloc'd, the caller frees it; NULL when out of memory. */
char *perf__utf8_sanitize(const char *s);

#endif
