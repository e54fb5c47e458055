/*
 * env_text.c - boolean spellings and the edit distance between names (see
 * env_text.h).
 */
#include "sdk/base/env_text.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

#define NAME_MAX_BYTES 63

int perf__bool_parse(const char *text, bool *out) {
  static const char *const k_true[] = {"1", "true", "yes", "on"};
  static const char *const k_false[] = {"0", "false", "no", "off"};
  if (!text) return -1;
  for (size_t i = 0; i < sizeof k_true / sizeof k_true[0]; i++) {
    if (strcasecmp(text, k_true[i]) == 0) {
      *out = true;
      return 0;
    }
    if (strcasecmp(text, k_false[i]) == 0) {
      *out = false;
      return 0;
    }
  }
  return -1;
}

/* Optimal string alignment distance: Levenshtein plus the swap of two
   neighbours (ENDPIONT is one edit from ENDPOINT), on three rows. */
unsigned perf__edit_distance(const char *a, const char *b, unsigned cap) {
  size_t n = strlen(a), m = strlen(b);
  if (n > NAME_MAX_BYTES || m > NAME_MAX_BYTES) return cap;
  unsigned rows[3][NAME_MAX_BYTES + 1];
  unsigned *before = rows[0], *prev = rows[1], *cur = rows[2];
  for (size_t j = 0; j <= m; j++)
    prev[j] = (unsigned)j;
  for (size_t i = 1; i <= n; i++) {
    cur[0] = (unsigned)i;
    for (size_t j = 1; j <= m; j++) {
      int ai = tolower((unsigned char)a[i - 1]), bj = tolower((unsigned char)b[j - 1]);
      unsigned best = prev[j - 1] + (ai != bj);
      if (prev[j] + 1 < best) best = prev[j] + 1;
      if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
      if (i > 1 && j > 1 && ai == tolower((unsigned char)b[j - 2]) &&
          tolower((unsigned char)a[i - 2]) == bj && before[j - 2] + 1 < best)
        best = before[j - 2] + 1;
      cur[j] = best;
    }
    unsigned *t = before;
    before = prev;
    prev = cur;
    cur = t;
  }
  return prev[m] < cap ? prev[m] : cap;
}
