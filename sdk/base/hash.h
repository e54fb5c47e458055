/*
 * hash.h - the hash functions of the SDK's tables: FNV-1a over bytes and a
 * 64-bit finalizer (MurmurHash3's fmix64) that spreads a key's bits over
 * the whole word before it is masked into a bucket. Pure, any thread.
 */
#ifndef PERF_BASE_HASH_H
#define PERF_BASE_HASH_H

#include <stddef.h>
#include <stdint.h>

#define PERF__FNV_OFFSET 1469598103934665603ULL

static inline uint64_t perf__fnv1a(uint64_t h, const void *data, size_t len) {
  const uint8_t *p = data;
  for (size_t i = 0; i < len; i++)
    h = (h ^ p[i]) * 1099511628211ULL;
  return h;
}

static inline uint64_t perf__mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

#endif
