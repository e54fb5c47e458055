/*
 * le.h - unsigned integers as little-endian bytes and back: the spool's
 * file header, the journal's record header and the upload helper's
 * frames. Async-signal-safe; any thread.
 */
#ifndef PERF_BASE_LE_H
#define PERF_BASE_LE_H

#include <stdint.h>

/* The low `bytes` bytes of v at p, least significant first. */
static inline void perf__le_put(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++)
    p[i] = (uint8_t)(v >> (8 * i));
}

/* The `bytes` bytes at p, least significant first. */
static inline uint64_t perf__le_get(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++)
    v |= (uint64_t)p[i] << (8 * i);
  return v;
}

#endif
