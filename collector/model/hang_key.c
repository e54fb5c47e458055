/*
 * hang_key.c - a hang's key and its group (see hang_key.h).
 */
#include "collector/model/hang_key.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sdk/base/utf8.h"

/* c escaped as jansson's json_dumps escapes it in a string (no flags):
   its text in out (at most 6 bytes), or 0 when c stands for itself. */
static size_t escape(unsigned char c, char out[7]) {
  static const char SHORT[] = "\"\\\b\f\n\r\t";
  static const char LETTER[] = "\"\\bfnrt";
  if (c >= 0x20 && c != '"' && c != '\\') return 0;
  const char *at = c ? memchr(SHORT, c, sizeof SHORT - 1) : NULL;
  if (at) {
    out[0] = '\\';
    out[1] = LETTER[at - SHORT];
    return 2;
  }
  if (c >= 0x20) return 0;
  snprintf(out, 7, "\\u%04X", c);
  return 6;
}

/* names as a compact JSON array of strings, byte for byte what jansson's
   json_dumps(JSON_COMPACT) makes of it (building and dumping jansson's
   objects costs about 3% of a batch's ingest); NULL when a name is
   not UTF-8 (jansson refuses it too) or out of memory. */
static char *names_json(const char *const *names, size_t n) {
  size_t bytes = 3; /* [ ] NUL */
  char seq[7];
  for (size_t i = 0; i < n; i++) {
    if (!perf__utf8_valid(names[i])) return NULL;
    bytes += 3; /* quotes, comma */
    for (const unsigned char *p = (const unsigned char *)names[i]; *p; p++) {
      size_t len = escape(*p, seq);
      bytes += len ? len : 1;
    }
  }
  char *out = malloc(bytes), *at = out;
  if (!out) return NULL;
  *at++ = '[';
  for (size_t i = 0; i < n; i++) {
    if (i) *at++ = ',';
    *at++ = '"';
    for (const unsigned char *p = (const unsigned char *)names[i]; *p; p++) {
      size_t len = escape(*p, seq);
      if (len) {
        memcpy(at, seq, len);
        at += len;
      } else {
        *at++ = (char)*p;
      }
    }
    *at++ = '"';
  }
  *at++ = ']';
  *at = '\0';
  return out;
}

int hang_key_group(const char *const *names, size_t n, store_group_t *g) {
  snprintf(g->signature, sizeof g->signature, "%016llx",
           (unsigned long long)perf__signature_hash(names, n));
  g->names_json = names_json(names, n);
  return g->names_json ? 0 : -1;
}

int hang_key_make(store_hang_t *h, size_t fallback) {
  size_t max = 0;
  for (size_t i = 0; i < h->samples.n; i++)
    if (h->samples.stacks[i].depth > max) max = h->samples.stacks[i].depth;
  const char **key = calloc(max ? max : 1, sizeof *key);
  if (!key) return -1;
  perf__hang_key(&h->samples, key, max, &h->len);
  h->key = key;
  if (h->len) return hang_key_group(key, h->len, &h->group);
  const perf__named_stack_t *s = &h->samples.stacks[fallback < h->samples.n ? fallback : 0];
  return hang_key_group(s->frames, s->depth, &h->group);
}

void hang_key_release(store_hang_t *h) {
  free((void *)h->key);
  free((char *)h->group.names_json);
  h->key = NULL;
  h->group.names_json = NULL;
  h->len = 0;
}
