/*
 * hex.c - bytes as lowercase hex digits and back (see hex.h).
 */
#include "sdk/base/hex.h"

void perf__hex_encode(const uint8_t *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * n] = '\0';
}

static int digit(char c) {
  return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

bool perf__hex_decode(const char *text, size_t n, uint8_t *bytes) {
  for (size_t i = 0; i < n; i++) {
    int hi = digit(text[2 * i]), lo = hi < 0 ? -1 : digit(text[2 * i + 1]);
    if (lo < 0) return false;
    bytes[i] = (uint8_t)(hi << 4 | lo);
  }
  return true;
}
