/*
 * utf8.c - UTF-8 well-formedness and repair (see utf8.h).
 */
#include "sdk/base/utf8.h"

#include <stdlib.h>
#include <string.h>

#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */

size_t perf__utf8_seq(const unsigned char *p, size_t n) {
  static const unsigned smallest[5] = {0, 0, 0x80, 0x800, 0x10000}; /* no overlong forms */
  unsigned c = p[0];
  if (c < 0x80) return 1;
  size_t len = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
  if (len == 0 || n < len) return 0;
  unsigned cp = c & (0x7fu >> len);
  for (size_t i = 1; i < len; i++) {
    if ((p[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  bool ok = cp >= smallest[len] && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
  return ok ? len : 0;
}

size_t perf__utf8_prefix(const char *s, size_t max) {
  size_t len = strnlen(s, max + 4), i = 0;
  while (i < len && i < max) {
    size_t seq = perf__utf8_seq((const unsigned char *)s + i, len - i);
    if (seq == 0) seq = 1;
    if (i + seq > max) break;
    i += seq;
  }
  return i;
}

bool perf__utf8_valid(const char *s) {
  const unsigned char *p = (const unsigned char *)s;
  size_t n = strlen(s);
  while (n > 0) {
    size_t k = perf__utf8_seq(p, n);
    if (k == 0) return false;
    p += k;
    n -= k;
  }
  return true;
}

char *perf__utf8_sanitize(const char *s) {
  size_t n = strlen(s);
  char *clean = malloc(3 * n + 1), *out = clean;
  if (!clean) return NULL;
  const unsigned char *p = (const unsigned char *)s;
  while (n > 0) {
    size_t k = perf__utf8_seq(p, n);
    if (k) {
      memcpy(out, p, k);
      out += k;
    } else {
      memcpy(out, REPLACEMENT, 3);
      out += 3;
      k = 1;
    }
    p += k;
    n -= k;
  }
  *out = '\0';
  return clean;
}
